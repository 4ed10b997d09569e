package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

const clusterOperatorName = "bootimage-operator"

// installedAt rewrites ClusterVersion so the cluster was installed at install and now runs current.
func installedAt(install, current string) {
	GinkgoHelper()
	cv := &configv1.ClusterVersion{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "version"}, cv)).To(Succeed())
	want := cv.DeepCopy()
	want.Status.Desired.Version = current
	at := metav1.Now()
	want.Status.History = []configv1.UpdateHistory{
		{State: configv1.CompletedUpdate, Version: current, Image: "quay.io/openshift-release-dev/ocp-release@sha256:0421", StartedTime: at, CompletionTime: &at},
		{State: configv1.CompletedUpdate, Version: install, Image: "quay.io/openshift-release-dev/ocp-release@sha256:0412", StartedTime: at, CompletionTime: &at},
	}
	Expect(fixtures.SetStatus(ctx, k8s, cv, want)).To(Succeed())
}

func skewStatus() operatorv1.BootImageSkewEnforcementStatus {
	return machineConfiguration().Status.BootImageSkewEnforcementStatus
}

func clusterOperatorUpgradeable() *configv1.ClusterOperatorStatusCondition {
	co := &configv1.ClusterOperator{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: clusterOperatorName}, co); err != nil {
		return nil
	}
	for _, c := range co.Status.Conditions {
		if c.Type == configv1.OperatorUpgradeable {
			return &c
		}
	}
	return nil
}

var _ = Describe("Boot image skew enforcement", func() {
	start := func() {
		mgr := startOperator(controllers.Options{Images: staticImages, ClusterOperator: clusterOperatorName})
		DeferCleanup(func() {
			Expect(mgr.Stop()).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &configv1.ClusterOperator{})).To(Succeed())
		})
	}
	automatic := func(ocp string) operatorv1.BootImageSkewEnforcementStatus {
		return operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusAutomatic, Automatic: operatorv1.ClusterBootImageAutomatic{OCPVersion: ocp}}
	}

	It("records the stream's release once every MachineSet is updated, and lets upgrades through", func() {
		bootImageCluster(configv1.GCPPlatformType)
		installedAt("4.12.9", "4.20.3")
		Expect(fixtures.Create(ctx, k8s,
			fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)),
			fixtures.MachineSet("worker-b", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		start()

		Eventually(skewStatus).Should(Equal(automatic("4.20.3")))
		Eventually(clusterOperatorUpgradeable).Should(And(HaveField("Status", configv1.ConditionTrue), HaveField("Reason", "AsExpected")))
	})

	It("keeps the install version while a selected MachineSet is left on a custom image, and blocks upgrades naming it", func() {
		bootImageCluster(configv1.GCPPlatformType)
		installedAt("4.12.9", "4.20.3")
		Expect(fixtures.Create(ctx, k8s,
			fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)),
			fixtures.MachineSet("custom", fixtures.GCPProviderSpec("projects/my-project/global/images/my-golden-image")))).To(Succeed())
		start()

		Eventually(func() any { return providerSpec("worker-a")["disks"].([]any)[0].(map[string]any)["image"] }).Should(Equal(fixtures.NewGCPImage))
		Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(HaveField("Status", metav1.ConditionFalse))
		Expect(skewStatus()).To(Equal(automatic("4.12.9")))
		writes := recordWrites(&operatorv1.MachineConfigurationList{})
		for _, w := range writtenDuringResync(writes, machineConfiguration(), "machineconfiguration", 1) {
			Expect(w.Object.(*operatorv1.MachineConfiguration).Status.BootImageSkewEnforcementStatus).To(Equal(automatic("4.12.9")), "a pass with a MachineSet left behind records the release")
		}
		Eventually(clusterOperatorUpgradeable).Should(And(
			HaveField("Status", configv1.ConditionFalse),
			HaveField("Reason", status.ReasonClusterBootImageSkewError),
			HaveField("Message", And(ContainSubstring("OCP 4.12.9"), ContainSubstring("custom")))))

		By("the custom MachineSet taken out of the way, the next pass records the release and the block clears")
		Expect(k8s.Delete(ctx, getMachineSet("custom"))).To(Succeed())
		Eventually(skewStatus).Should(Equal(automatic("4.20.3")))
		Eventually(clusterOperatorUpgradeable).Should(HaveField("Status", configv1.ConditionTrue))
	})

	It("compares the admin's version in Manual mode, and has no guard with None", func() {
		bootImageCluster(configv1.GCPPlatformType)
		start()
		Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json",
			[]byte(`{"spec":{"bootImageSkewEnforcement":{"mode":"Manual","manual":{"mode":"OCPVersion","ocpVersion":"4.11.0"}}}}`)))).To(Succeed())
		Eventually(clusterOperatorUpgradeable).Should(And(
			HaveField("Status", configv1.ConditionFalse),
			HaveField("Message", ContainSubstring("OCP 4.11.0, older than the oldest supported OCP 4.13.0"))))

		Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json",
			[]byte(`{"spec":{"bootImageSkewEnforcement":{"mode":"None","manual":null}}}`)))).To(Succeed())
		Eventually(skewStatus).Should(HaveField("Mode", operatorv1.BootImageSkewEnforcementModeStatusNone))
		Eventually(clusterOperatorUpgradeable).Should(HaveField("Status", configv1.ConditionTrue))
	})

	DescribeTable("writes a valid status and keeps updating boot images whatever the release strings",
		func(setUp func(), want string) {
			bootImageCluster(configv1.GCPPlatformType)
			setUp()
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
			start()
			Eventually(func() any { return providerSpec("worker-a")["disks"].([]any)[0].(map[string]any)["image"] }).Should(Equal(fixtures.NewGCPImage))
			Eventually(skewStatus).Should(Equal(automatic(want)))
			Expect(condition(status.ConditionStatusWritten)()).To(Equal(metav1.Condition{}), "no status write was rejected")
		},
		Entry("a nightly", func() {
			installedAt("4.21.0-0.nightly-2026-10-01-101010", "4.22.0-0.nightly-2026-11-20-121212")
			setReleaseVersion("4.22.0-0.nightly-2026-11-20-121212")
		}, "4.22.0"),
		Entry("OKD", func() {
			installedAt("4.21.0-okd-scos.5", "4.21.0-okd-scos.5")
			setReleaseVersion("4.21.0-okd-scos.5")
		}, "4.21.0"),
		Entry("no ClusterVersion", func() {
			Expect(k8s.DeleteAllOf(ctx, &configv1.ClusterVersion{})).To(Succeed())
		}, "4.20.3"),
	)
})

// setReleaseVersion sets coreos-bootimages' releaseVersion.
func setReleaseVersion(v string) {
	GinkgoHelper()
	cm := &corev1.ConfigMap{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: kube.MCONamespace, Name: kube.BootImagesConfigMapName}, cm)).To(Succeed())
	cm.Data["releaseVersion"] = v
	Expect(k8s.Update(ctx, cm)).To(Succeed())
}
