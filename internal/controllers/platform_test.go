package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// Issue 20 item 1: on Azure Stack Hub the MCO's CheckBootImagePlatform returns false for
// everything, so its boot image controller never starts and its status sync leaves
// managedBootImagesStatus alone and records Manual skew enforcement with the install version.
var _ = Describe("Azure Stack Hub", func() {
	It("skips every MachineSet and the CPMS with a reason naming the cloud, manages nothing, and says why", func() {
		Expect(fixtures.Create(ctx, k8s,
			fixtures.AzureStackHubInfrastructure(),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.BootImageSkewEnforcement, fg.ManagedBootImagesCPMS}, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
			fixtures.MachineSet("worker-a", fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, "")),
			fixtures.ControlPlaneMachineSet(fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, ""), machinev1.ControlPlaneMachineSetStateActive),
		)).To(Succeed())
		DeferCleanup(cleanCluster)
		DeferCleanup(func() {
			Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kube.MCONamespace))).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &machinev1.ControlPlaneMachineSet{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		})
		before := getMachineSet("worker-a")
		mgr := startOperator(controllers.Options{Images: staticImages})
		DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })

		Eventually(machineSetEvents("worker-a")).Should(ContainElement(
			"UnsupportedPlatform: Boot image update skipped: boot images of machinesets are not managed on Azure Stack Hub (Infrastructure status.platformStatus.azure.cloudName AzureStackCloud): its boot images are fixed at install"))
		Eventually(cpmsEvents).Should(ContainElement(ContainSubstring("UnsupportedPlatform: Boot image update skipped: boot images of controlplanemachinesets are not managed on Azure Stack Hub")))
		Eventually(condition(status.ConditionBootImageUpdateSupported)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", bootimage.ReasonUnsupportedPlatform),
			HaveField("Message", ContainSubstring("Azure Stack Hub (Infrastructure status.platformStatus.azure.cloudName AzureStackCloud)"))))
		Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(HaveField("Message",
			"Reconciled 1 of 1 MAPI MachineSets (1 skipped) | Reconciled 1 of 1 ControlPlaneMachineSets (1 skipped)"))
		mc := machineConfiguration()
		Expect(mc.Status.ManagedBootImagesStatus.MachineManagers).To(BeEmpty())
		Expect(mc.Status.BootImageSkewEnforcementStatus).To(Equal(operatorv1.BootImageSkewEnforcementStatus{
			Mode:   operatorv1.BootImageSkewEnforcementModeStatusManual,
			Manual: operatorv1.ClusterBootImageManual{Mode: operatorv1.ClusterBootImageSpecModeOCPVersion, OCPVersion: "4.20.3"},
		}))
		// The skips were decided, so no patch is coming.
		Expect(getMachineSet("worker-a").ResourceVersion).To(Equal(before.ResourceVersion))
	})
})
