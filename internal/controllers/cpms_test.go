package controllers_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

func getCPMS() *machinev1.ControlPlaneMachineSet {
	GinkgoHelper()
	c := &machinev1.ControlPlaneMachineSet{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "cluster"}, c)).To(Succeed())
	return c
}

func cpmsProviderSpec() map[string]any {
	GinkgoHelper()
	var ps map[string]any
	Expect(json.Unmarshal(getCPMS().Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
	return ps
}

var cpmsProviderSpecPath = []string{"spec", "template", "machines_v1beta1_machine_openshift_io", "spec", "providerSpec", "value"}

func cpmsEvents() []string {
	list := &corev1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "ControlPlaneMachineSet" {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// cpmsCluster seeds a stable cluster on platform, opting the CPMS in (All), out (None) or
// leaving it to the default (nil).
func cpmsCluster(platform configv1.PlatformType, mode *operatorv1.MachineManagerSelectorMode, providerSpec string, state ...machinev1.ControlPlaneMachineSetState) {
	GinkgoHelper()
	cluster(platform, true)
	var spec *operatorv1.ManagedBootImages
	if mode != nil {
		spec = &operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, *mode, nil)}}
	}
	Expect(fixtures.Create(ctx, k8s,
		fixtures.MachineConfiguration(spec),
		fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		fixtures.ControlPlaneMachineSet(providerSpec, append(state, machinev1.ControlPlaneMachineSetStateActive)[0]),
	)).To(Succeed())
	DeferCleanup(func() {
		Expect(k8s.DeleteAllOf(ctx, &machinev1.ControlPlaneMachineSet{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kube.MCONamespace))).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
	})
}

func modePtr(m operatorv1.MachineManagerSelectorMode) *operatorv1.MachineManagerSelectorMode {
	return &m
}

var _ = Describe("ControlPlaneMachineSet boot images", func() {
	start := func() {
		mgr := startOperator(controllers.Options{Images: staticImages})
		DeferCleanup(mgr.Stop)
	}

	DescribeTable("opted in with All: updates only the image fields",
		func(platform configv1.PlatformType, spec string, image func(map[string]any) any, want any) {
			cpmsCluster(platform, modePtr(operatorv1.All), spec)
			before := getCPMS()
			start()
			Eventually(func() any { return image(cpmsProviderSpec()) }).Should(Equal(want))
			Expect(withoutImage(getCPMS(), cpmsProviderSpecPath...)).To(Equal(withoutImage(before, cpmsProviderSpecPath...)), "the whole CPMS differs only in the image")
			Eventually(cpmsEvents).Should(ContainElement(HavePrefix("BootImageUpdated: Updated boot image from")))
			Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(HaveField("Message",
				"Reconciled 0 of 0 MAPI MachineSets (0 skipped) | Reconciled 1 of 1 ControlPlaneMachineSets (0 skipped)"))
		},
		Entry("AWS", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI),
			func(ps map[string]any) any { return ps["ami"].(map[string]any)["id"] }, fixtures.NewAWSAMIUSEast1),
		Entry("GCP", configv1.GCPPlatformType, fixtures.GCPProviderSpec(fixtures.OldGCPImage),
			func(ps map[string]any) any { return ps["disks"].([]any)[0].(map[string]any)["image"] }, fixtures.NewGCPImage),
		Entry("Azure", configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, ""),
			func(ps map[string]any) any { return ps["image"].(map[string]any)["version"] }, fixtures.NewAzureVersion),
	)

	DescribeTable("leaves it alone unless opted in",
		func(mode *operatorv1.MachineManagerSelectorMode) {
			cpmsCluster(configv1.AWSPlatformType, mode, fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
			writes := recordWrites(&machinev1.ControlPlaneMachineSetList{})
			start()
			Eventually(cpmsEvents).Should(ContainElement(HavePrefix("NotSelected")))
			expectNoWrites(writes, getCPMS(), "controlplanemachineset", 1)
		},
		Entry("None", modePtr(operatorv1.None)),
		Entry("no opinion: the CPMS defaults to None", nil),
	)

	It("follows the ManagedBootImagesCPMS gate as it flips, without a restart", func() {
		cpmsCluster(configv1.AWSPlatformType, modePtr(operatorv1.All), fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		gate := &configv1.FeatureGate{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, gate)).To(Succeed())
		setGate := func(on bool) {
			enabled, disabled := []configv1.FeatureGateName{fg.BootImageSkewEnforcement}, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}
			if on {
				enabled, disabled = append(enabled, fg.ManagedBootImagesCPMS), nil
			}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, gate)).To(Succeed())
			Expect(fixtures.SetStatus(ctx, k8s, gate, fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, enabled, disabled))).To(Succeed())
		}
		setGate(false)
		writes := recordWrites(&machinev1.ControlPlaneMachineSetList{})
		start()
		Eventually(cpmsEvents).Should(ContainElement(HavePrefix("FeatureGateDisabled: Boot image update skipped: feature gate ManagedBootImagesCPMS is off")))
		expectNoWrites(writes, getCPMS(), "controlplanemachineset", 1)

		setGate(true)
		Eventually(func() any { return cpmsProviderSpec()["ami"].(map[string]any)["id"] }).Should(Equal(fixtures.NewAWSAMIUSEast1))

		setGate(false)
		Eventually(func() []string { return cpmsEvents() }).Should(ContainElement(HavePrefix("FeatureGateDisabled")))
		revert := []byte(`{"spec":{"template":{"machines_v1beta1_machine_openshift_io":{"spec":{"providerSpec":{"value":{"ami":{"id":"` + fixtures.OldAWSAMI + `"}}}}}}}}`)
		writes = recordWrites(&machinev1.ControlPlaneMachineSetList{})
		Expect(k8s.Patch(ctx, getCPMS(), client.RawPatch("application/merge-patch+json", revert))).To(Succeed())
		Expect(writtenDuringResync(writes, getCPMS(), "controlplanemachineset", 1)).To(HaveLen(1), "only the revert")
	})

	It("skips an Inactive CPMS with its reason", func() {
		// The API allows Inactive only before the CPMS was ever Active.
		cpmsCluster(configv1.AWSPlatformType, modePtr(operatorv1.All), fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), machinev1.ControlPlaneMachineSetStateInactive)
		writes := recordWrites(&machinev1.ControlPlaneMachineSetList{})
		start()
		Eventually(cpmsEvents).Should(ContainElement(HavePrefix("ControlPlaneMachineSetInactive")))
		expectNoWrites(writes, getCPMS(), "controlplanemachineset", 1)
	})

	It("reports nothing wrong when there is no CPMS", func() {
		cluster(configv1.AWSPlatformType, true)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(nil), fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"))).To(Succeed())
		DeferCleanup(func() {
			Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kube.MCONamespace))).To(Succeed())
		})
		start()
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", "Reconciled 0 of 0 MAPI MachineSets (0 skipped) | Reconciled 0 of 0 ControlPlaneMachineSets (0 skipped)")))
	})
})
