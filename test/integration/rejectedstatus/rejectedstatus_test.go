// Package rejectedstatus runs the operator against a MachineConfiguration CRD stricter than the one
// it was built for, which refuses the skew enforcement status it computes, as a newer API could.
package rejectedstatus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

const refusal = "this API refuses ocpVersion 4.20.3"

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestRejectedStatus(t *testing.T) {
	testenv.RunSpecs(t, "operator on a MachineConfiguration CRD that refuses its skew status", testenv.Waits{Timeout: 30 * time.Second})
}

var _ = BeforeSuite(func() {
	env = testenv.StartForSpecsChangingCRDs("the CRD has the skew enforcement status this suite constrains", func(crd *apiextensionsv1.CustomResourceDefinition) int {
		if crd.Spec.Names.Kind != "MachineConfiguration" {
			return 0
		}
		added := 0
		for _, v := range crd.Spec.Versions {
			status := v.Schema.OpenAPIV3Schema.Properties["status"]
			skew, ok := status.Properties["bootImageSkewEnforcementStatus"]
			if !ok {
				continue
			}
			automatic := skew.Properties["automatic"]
			automatic.XValidations = append(automatic.XValidations, apiextensionsv1.ValidationRule{Rule: "!has(self.ocpVersion) || self.ocpVersion != '4.20.3'", Message: refusal})
			skew.Properties["automatic"] = automatic
			status.Properties["bootImageSkewEnforcementStatus"] = skew
			v.Schema.OpenAPIV3Schema.Properties["status"] = status
			added++
		}
		return added
	})
})

var _ = Describe("A status the API rejects", func() {
	It("is reported with the API's message, while the boot images are still updated", func() {
		Expect(fixtures.Create(ctx, env.Client, fixtures.GCPCluster(
			fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))...)).To(Succeed())
		mgr, err := env.StartOperator(controllers.Options{ReleaseVersion: fixtures.ReleaseVersion})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mgr.Stop)

		mc := &operatorv1.MachineConfiguration{}
		get := func() *operatorv1.MachineConfiguration {
			Expect(env.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
			return mc
		}
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(get().Status.Conditions, status.ConditionStatusWritten)
		}).Should(And(
			Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Message", ContainSubstring(refusal))))
		Expect(mc.Status.ObservedGeneration).To(Equal(mc.Generation), "the boot image reconcilers wait for it")
		Expect(mc.Status.BootImageSkewEnforcementStatus.Mode).To(BeEmpty(), "nothing the API refuses is kept")

		ms := &machinev1beta1.MachineSet{}
		Eventually(func() string {
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "worker-a"}, ms)).To(Succeed())
			var ps map[string]any
			Expect(json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
			return ps["disks"].([]any)[0].(map[string]any)["image"].(string)
		}).Should(Equal(fixtures.NewGCPImage))
		Eventually(func() []string {
			events := &corev1.EventList{}
			Expect(env.Client.List(ctx, events)).To(Succeed())
			var reasons []string
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "MachineConfiguration" {
					reasons = append(reasons, e.Reason+": "+e.Message)
				}
			}
			return reasons
		}).Should(ContainElement(And(HavePrefix(status.ReasonStatusRejected), ContainSubstring(refusal))))

		// The fallback status is what this operator applied: a reconcile that computes the same
		// status again must not take it for another writer's.
		before, err := testenv.Reconciles("machineconfiguration")
		Expect(err).NotTo(HaveOccurred())
		nudges := 0
		Eventually(func() (float64, error) {
			nudges++
			nudge := fmt.Appendf(nil, `{"metadata":{"annotations":{"example.com/nudge":"%d"}}}`, nudges)
			Expect(env.Client.Patch(ctx, get(), client.RawPatch(types.MergePatchType, nudge))).To(Succeed())
			return testenv.Reconciles("machineconfiguration")
		}).Should(BeNumerically(">=", before+2), "two reconciles after the fallback landed, the second started after the first")
		Expect(meta.FindStatusCondition(get().Status.Conditions, status.ConditionBootImageUpdateDegraded)).
			To(HaveField("Reason", Not(Equal(status.ReasonSecondWriter))))
		events := &corev1.EventList{}
		Expect(env.Client.List(ctx, events)).To(Succeed())
		for _, e := range events.Items {
			Expect(e.Reason).NotTo(Equal(status.ReasonSecondWriter), "%s/%s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	})
})
