package api_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// loadAdmissionPolicies reads the shipped ValidatingAdmissionPolicies and their bindings.
func loadAdmissionPolicies() []client.Object {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(manifests.RepoRoot(), "manifests", manifests.AdmissionFile))
	Expect(err).NotTo(HaveOccurred())
	var objs []client.Object
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			return objs
		}
		Expect(err).NotTo(HaveOccurred())
		var meta struct{ Kind string }
		Expect(yaml.Unmarshal(doc, &meta)).To(Succeed())
		var obj client.Object
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			obj = &admissionv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionv1.ValidatingAdmissionPolicyBinding{}
		default:
			Fail("unexpected kind " + meta.Kind)
		}
		Expect(yaml.UnmarshalStrict(doc, obj)).To(Succeed())
		objs = append(objs, obj)
	}
}

// Ordered for its BeforeAll: the policies and their bindings are installed once and probed until
// in force (seconds each); the specs then only create and update objects of their own.
var _ = Describe("Shipped ValidatingAdmissionPolicies", Ordered, func() {
	BeforeAll(func() {
		policies := loadAdmissionPolicies()
		for _, obj := range policies {
			Expect(k8s.Create(ctx, obj)).To(Succeed())
		}
		// The suite's other specs create MachineConfigurations right after an Infrastructure, with
		// no retry: they must not run while the API server still enforces these policies (which
		// deny while it has not seen the Infrastructure). Leave only once it no longer does: with
		// no Infrastructure the platform policy denies everything, the name policy "second".
		DeferCleanup(func() {
			for _, obj := range policies {
				Expect(k8s.Delete(ctx, obj)).To(Succeed())
			}
			probe := fixtures.MachineConfiguration(nil)
			probe.Name = "second"
			Eventually(func() error { return fixtures.Create(ctx, k8s, probe.DeepCopy()) }).Should(Succeed())
			Expect(k8s.Delete(ctx, probe)).To(Succeed())
		})
	})
	AfterEach(func() {
		Expect(k8s.DeleteAllOf(ctx, &operatorv1.MachineConfiguration{})).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &configv1.Infrastructure{})).To(Succeed())
	})

	clusterAPIAdmissionSpecs()

	managers := func(entries ...operatorv1.MachineManager) *operatorv1.MachineConfiguration {
		return fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: entries})
	}
	ms := func(mode operatorv1.MachineManagerSelectorMode) operatorv1.MachineManager {
		return fixtures.MachineManager(operatorv1.MachineSets, mode, nil)
	}
	cpms := func(mode operatorv1.MachineManagerSelectorMode) operatorv1.MachineManager {
		return fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, mode, nil)
	}
	// expectCreate retries while the API server loads the policies: until the create is denied
	// with denial, or succeeds when denial is empty.
	expectCreate := func(mc *operatorv1.MachineConfiguration, denial string) {
		GinkgoHelper()
		create := func() error {
			err := fixtures.Create(ctx, k8s, mc.DeepCopy())
			if err == nil && denial != "" {
				Expect(k8s.DeleteAllOf(ctx, &operatorv1.MachineConfiguration{})).To(Succeed())
			}
			return err
		}
		if denial == "" {
			Eventually(create).Should(Succeed())
			return
		}
		Eventually(create).Should(MatchError(ContainSubstring(denial)))
	}

	DescribeTable("by platform",
		func(platform configv1.PlatformType, mc *operatorv1.MachineConfiguration, denial string) {
			Expect(fixtures.Create(ctx, k8s, fixtures.Infrastructure(platform))).To(Succeed())
			expectCreate(mc, denial)
		},
		Entry("MachineSets All on AWS", configv1.AWSPlatformType, managers(ms(operatorv1.All)), ""),
		Entry("MachineSets All on vSphere", configv1.VSpherePlatformType, managers(ms(operatorv1.All)), ""),
		Entry("MachineSets All on bare metal", configv1.BareMetalPlatformType, managers(ms(operatorv1.All)),
			"boot image updates for machinesets are only supported on AWS, Azure, GCP and VSphere, and this cluster runs on BareMetal"),
		Entry("MachineSets None on bare metal: opting out is always allowed", configv1.BareMetalPlatformType, managers(ms(operatorv1.None)), ""),
		Entry("CPMS All on GCP", configv1.GCPPlatformType, managers(cpms(operatorv1.All)), ""),
		Entry("CPMS All on vSphere", configv1.VSpherePlatformType, managers(cpms(operatorv1.All)),
			"boot image updates for controlplanemachinesets are only supported on AWS, Azure and GCP, and this cluster runs on VSphere"),
		Entry("CPMS None on vSphere", configv1.VSpherePlatformType, managers(cpms(operatorv1.None)), ""),
		Entry("no boot image settings on Nutanix", configv1.NutanixPlatformType, fixtures.MachineConfiguration(nil), ""),
	)

	DescribeTable("on Azure Stack Hub, whose boot images are fixed at install",
		func(mc *operatorv1.MachineConfiguration, denial string) {
			Expect(fixtures.Create(ctx, k8s, fixtures.AzureStackHubInfrastructure())).To(Succeed())
			expectCreate(mc, denial)
		},
		Entry("MachineSets All", managers(ms(operatorv1.All)), "boot image updates for machinesets are only supported on AWS, Azure, GCP and VSphere, and this cluster runs on Azure Stack Hub (platformStatus.azure.cloudName AzureStackCloud)"),
		Entry("CPMS All", managers(cpms(operatorv1.All)), "boot image updates for controlplanemachinesets are only supported on AWS, Azure and GCP, and this cluster runs on Azure Stack Hub"),
		Entry("MachineSets and CPMS None: opting out is allowed", managers(ms(operatorv1.None), cpms(operatorv1.None)), ""),
	)

	// The policy ratchets against oldObject: an object that holds an entry the platform refuses
	// (opted in on AWS, then the Infrastructure says bare metal) still takes unrelated changes.
	It("refuses only entries that are new or changed", func() {
		infra := fixtures.Infrastructure(configv1.AWSPlatformType)
		Expect(fixtures.Create(ctx, k8s, infra)).To(Succeed())
		expectCreate(managers(ms(operatorv1.All)), "")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(infra), infra)).To(Succeed())
		infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.BareMetalPlatformType}
		Expect(k8s.Status().Update(ctx, infra)).To(Succeed())

		// Merge patches: a typed round trip would drop required fields the API defaulted.
		patch := func(spec string) func() error {
			return func() error {
				mc := &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
				return k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":`+spec+`}`)))
			}
		}
		const (
			msAll     = `{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"All"}}`
			msPartial = `{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"Partial","partial":{"machineResourceSelector":{"matchLabels":{"a":"b"}}}}}`
			msNone    = `{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"None"}}`
			cpmsNone  = `{"resource":"controlplanemachinesets","apiGroup":"machine.openshift.io","selection":{"mode":"None"}}`
			cpmsAll   = `{"resource":"controlplanemachinesets","apiGroup":"machine.openshift.io","selection":{"mode":"All"}}`
		)
		managersPatch := func(entries ...string) func() error {
			return patch(`{"managedBootImages":{"machineManagers":[` + strings.Join(entries, ",") + `]}}`)
		}
		// Changing the refused entry is refused, once the API server sees the new Infrastructure:
		// wait with dry runs, since a change let through before that would be stored and ratchet.
		Eventually(func() error {
			mc := &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
			return k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType,
				[]byte(`{"spec":{"managedBootImages":{"machineManagers":[`+msPartial+`]}}}`)), client.DryRunAll)
		}).Should(MatchError(ContainSubstring("this cluster runs on BareMetal")))
		Expect(managersPatch(msPartial)()).To(MatchError(ContainSubstring("this cluster runs on BareMetal")))
		// An unrelated spec change goes through, the refused entry unchanged.
		Expect(patch(`{"logLevel":"Debug"}`)()).To(Succeed())
		// So does adding an opt-out beside it.
		Expect(managersPatch(msAll, cpmsNone)()).To(Succeed())
		// A new opt-in beside it is refused.
		Expect(managersPatch(msAll, cpmsAll)()).To(MatchError(ContainSubstring("controlplanemachinesets are only supported on AWS, Azure and GCP, and this cluster runs on BareMetal")))
		// Turning the refused entry off is allowed.
		Expect(managersPatch(msNone, cpmsNone)()).To(Succeed())
	})

	// The param in its barest valid form: an Infrastructure without status, as before the
	// installer writes it. The policy must neither fail (failurePolicy Fail would deny every
	// request) nor refuse what it has no reason to refuse.
	It("guards every optional field of the Infrastructure", func() {
		infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
		Expect(k8s.Create(ctx, infra)).To(Succeed())
		// Opting in is refused with a message that says why; seeing it also shows the API server
		// evaluates against this Infrastructure, so the creates after it need no retry.
		expectCreate(managers(ms(operatorv1.All)), "boot image updates for machinesets are only supported on AWS, Azure, GCP and VSphere, and this cluster runs on a platform not known yet (Infrastructure cluster has no status.platformStatus.type)")
		expectCreate(managers(cpms(operatorv1.All)), "this cluster runs on a platform not known yet")
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(nil))).To(Succeed(), "no boot image settings")
		Expect(k8s.DeleteAllOf(ctx, &operatorv1.MachineConfiguration{})).To(Succeed())
		Expect(fixtures.Create(ctx, k8s, managers(ms(operatorv1.None), cpms(operatorv1.None)))).To(Succeed(), "opting out")
		Expect(k8s.DeleteAllOf(ctx, &operatorv1.MachineConfiguration{})).To(Succeed())

		// A status naming Azure with no azure section is Azure, not Azure Stack Hub.
		infra.Status = fixtures.Infrastructure(configv1.AzurePlatformType).Status
		infra.Status.PlatformStatus.Azure = nil
		Expect(k8s.Status().Update(ctx, infra)).To(Succeed())
		expectCreate(managers(ms(operatorv1.All), cpms(operatorv1.All)), "")
	})

	It("allows only the name cluster", func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.Infrastructure(configv1.AWSPlatformType))).To(Succeed())
		mc := fixtures.MachineConfiguration(nil)
		mc.Name = "second"
		expectCreate(mc, "only a MachineConfiguration named cluster is allowed")
	})
})
