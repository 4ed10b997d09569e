package controllers_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// machineSetReconciles returns how many times the machineset controller has reconciled.
func machineSetReconciles() float64 {
	n, err := testenv.Reconciles("machineset")
	Expect(err).NotTo(HaveOccurred())
	return n
}

var _ = Describe("Changes that do not change a decision's inputs", func() {
	It("do not re-decide every MachineSet", func() {
		bootImageCluster(configv1.GCPPlatformType)
		const n = 20
		for i := range n {
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet(fmt.Sprintf("worker-%02d", i), fixtures.GCPProviderSpec(fixtures.NewGCPImage)))).To(Succeed())
		}
		mgr := startOperator(controllers.Options{Images: staticImages})
		DeferCleanup(mgr.Stop)
		Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Message", HavePrefix(fmt.Sprintf("Reconciled %d of %d", n, n)))))
		// The baseline: a count of at least n that then holds for a second. A window, not a
		// barrier: the count is per controller, and nothing the operator does shows that a given
		// MachineSet's reconciles are over (one key's barrier says nothing of the 7 other workers').
		var settled float64
		Eventually(func(g Gomega) {
			settled = machineSetReconciles()
			g.Expect(settled).To(BeNumerically(">=", n))
			g.Consistently(machineSetReconciles, "1s").Should(Equal(settled))
		}).Should(Succeed())

		By("touching a Secret nobody reads, ClusterVersion outside history and desired, Infrastructure and FeatureGate metadata")
		Expect(fixtures.Create(ctx, k8s, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fixtures.MachineAPINamespace, Name: "unrelated"}, StringData: map[string]string{"k": "v"}})).To(Succeed())
		cv := &configv1.ClusterVersion{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "version"}, cv)).To(Succeed())
		cv.Spec.Channel = "fast-4.20"
		Expect(k8s.Update(ctx, cv)).To(Succeed())
		for _, obj := range []client.Object{&configv1.Infrastructure{}, &configv1.FeatureGate{}} {
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, obj)).To(Succeed())
			obj.SetAnnotations(map[string]string{"touched": "yes"})
			Expect(k8s.Update(ctx, obj)).To(Succeed())
		}

		By("then a change of one MachineSet's labels, which re-decides that one")
		ms := getMachineSet("worker-00")
		ms.Labels["touched"] = "yes"
		Expect(k8s.Update(ctx, ms)).To(Succeed())
		Eventually(machineSetReconciles).Should(BeNumerically(">", settled))
		// A window, not a barrier: the touches above went through four other informers, whose
		// handlers no later event of the MachineSet informer is ordered after, and a re-decide that
		// changes nothing leaves nothing on the API server to wait for.
		Consistently(machineSetReconciles, "1s").Should(Equal(settled+1), "only the MachineSet whose labels changed was decided again")
	})
})
