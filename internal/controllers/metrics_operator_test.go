package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// metric returns the value of the series of name with labels among the metrics of reg, where
// the operator registered them; 0 when there is none.
func metric(reg prometheus.Gatherer, name string, labels ...string) func() float64 {
	return func() float64 {
		v, err := testenv.Metric(reg, name, labels...)
		Expect(err).NotTo(HaveOccurred())
		return v
	}
}

var _ = Describe("The operator's metrics", func() {
	It("follow what the operator does: updates written, decisions, errors, Degraded and the skew guard", func() {
		bootImageCluster(configv1.GCPPlatformType)
		installedAt("4.12.9", "4.20.3")
		Expect(fixtures.Create(ctx, k8s,
			fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)),
			fixtures.MachineSet("custom", fixtures.GCPProviderSpec("projects/my-project/global/images/my-golden-image")))).To(Succeed())
		operatorMetrics := prometheus.NewRegistry()
		updates := metric(operatorMetrics, "bootimage_updates_total", "kind", "MachineSet")
		errs := metric(operatorMetrics, "bootimage_errors_total", "kind", "MachineSet", "reason", bootimage.ReasonInvalidArchitecture)
		updatesBefore, errsBefore := updates(), errs()
		mgr := startOperator(controllers.Options{Images: staticImages, ClusterOperator: clusterOperatorName, Metrics: operatorMetrics})
		DeferCleanup(func() {
			Expect(mgr.Stop()).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &configv1.ClusterOperator{})).To(Succeed())
		})

		By("one MachineSet updated, one left on a custom image: upgrades blocked")
		Eventually(metric(operatorMetrics, "bootimage_upgrade_blocked")).Should(Equal(1.0))
		Eventually(metric(operatorMetrics, "bootimage_decisions", "kind", "MachineSet", "action", "NoChange", "reason", bootimage.ReasonUpToDate, "stream", "rhel-9")).Should(Equal(1.0))
		Expect(metric(operatorMetrics, "bootimage_decisions", "kind", "MachineSet", "action", "Skip", "reason", bootimage.ReasonCustomImage, "stream", "rhel-9")()).To(Equal(1.0))
		Expect(updates()-updatesBefore).To(Equal(1.0), "one boot image written")
		Expect(metric(operatorMetrics, "bootimage_degraded")()).To(BeZero())
		Expect(metric(operatorMetrics, "bootimage_last_successful_reconcile_timestamp_seconds")()).To(BeNumerically(">", 0))

		By("a MachineSet naming an unknown architecture: an Error, counted once, and Degraded")
		ms := getMachineSet("custom")
		ms.Annotations = map[string]string{bootimage.ArchAnnotation: "kubernetes.io/arch=sparc64"}
		Expect(k8s.Update(ctx, ms)).To(Succeed())
		Eventually(metric(operatorMetrics, "bootimage_degraded")).Should(Equal(1.0))
		Expect(errs() - errsBefore).To(Equal(1.0))
		Expect(metric(operatorMetrics, "bootimage_decisions", "kind", "MachineSet", "action", "Error", "reason", bootimage.ReasonInvalidArchitecture, "stream", "rhel-9")()).To(Equal(1.0))

		By("the broken MachineSet taken out of the way: the block and Degraded clear")
		Expect(k8s.Delete(ctx, getMachineSet("custom"))).To(Succeed())
		Eventually(metric(operatorMetrics, "bootimage_upgrade_blocked")).Should(BeZero())
		Eventually(metric(operatorMetrics, "bootimage_degraded")).Should(BeZero())
		Expect(errs()-errsBefore).To(Equal(1.0), "deciding again is not another error")
		Expect(updates() - updatesBefore).To(Equal(1.0))
	})
})
