package bootimage_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

type gateSet map[configv1.FeatureGateName]bool

func (g gateSet) Enabled(name configv1.FeatureGateName) bool {
	if v, ok := g[name]; ok {
		return v
	}
	return featuregates.Defaults[name]
}

var (
	cpmsOn  = gateSet{featuregates.ManagedBootImagesCPMS: true}
	cpmsOff = gateSet{}
	infra   = &metav1.LabelSelector{MatchLabels: map[string]string{"role": "infra"}}
)

func mm(resource operatorv1.MachineManagerMachineSetsResourceType, mode operatorv1.MachineManagerSelectorMode) operatorv1.MachineManager {
	m := operatorv1.MachineManager{Resource: resource, APIGroup: operatorv1.MachineAPI, Selection: operatorv1.MachineManagerSelector{Mode: mode}}
	if mode == operatorv1.Partial {
		m.Selection.Partial = &operatorv1.PartialSelector{MachineResourceSelector: infra}
	}
	return m
}

func spec(entries ...operatorv1.MachineManager) operatorv1.ManagedBootImages {
	return operatorv1.ManagedBootImages{MachineManagers: entries}
}

const (
	ms   = operatorv1.MachineSets
	cpms = operatorv1.ControlPlaneMachineSets
)

var _ = DescribeTable("EffectiveConfiguration",
	func(s operatorv1.ManagedBootImages, platform configv1.PlatformType, gates gateSet, want []operatorv1.MachineManager, problems int) {
		eff := bootimage.EffectiveConfiguration(s, platform, gates)
		Expect(eff.Status.MachineManagers).To(Equal(want))
		Expect(eff.Problems).To(HaveLen(problems))
	},
	Entry("no opinion, AWS, CPMS gate on: MachineSets All, CPMS None", operatorv1.ManagedBootImages{}, configv1.AWSPlatformType, cpmsOn, []operatorv1.MachineManager{mm(ms, operatorv1.All), mm(cpms, operatorv1.None)}, 0),
	Entry("no opinion, AWS, CPMS gate off: MachineSets only", operatorv1.ManagedBootImages{}, configv1.AWSPlatformType, cpmsOff, []operatorv1.MachineManager{mm(ms, operatorv1.All)}, 0),
	Entry("no opinion, vSphere, CPMS gate on: no CPMS on vSphere", operatorv1.ManagedBootImages{}, configv1.VSpherePlatformType, cpmsOn, []operatorv1.MachineManager{mm(ms, operatorv1.All)}, 0),
	Entry("no opinion, GCP", operatorv1.ManagedBootImages{}, configv1.GCPPlatformType, cpmsOn, []operatorv1.MachineManager{mm(ms, operatorv1.All), mm(cpms, operatorv1.None)}, 0),
	Entry("no opinion, Azure", operatorv1.ManagedBootImages{}, configv1.AzurePlatformType, cpmsOn, []operatorv1.MachineManager{mm(ms, operatorv1.All), mm(cpms, operatorv1.None)}, 0),
	Entry("no opinion, Azure Stack Hub: nothing managed (the MCO's CheckBootImagePlatform refuses AzureStackCloud)", operatorv1.ManagedBootImages{}, bootimage.AzureStackHub, cpmsOn, []operatorv1.MachineManager{}, 0),
	Entry("opt-in on Azure Stack Hub is not in force", spec(mm(ms, operatorv1.All), mm(cpms, operatorv1.All)), bootimage.AzureStackHub, cpmsOn, []operatorv1.MachineManager{}, 0),
	Entry("no opinion, BareMetal: nothing managed", operatorv1.ManagedBootImages{}, configv1.BareMetalPlatformType, cpmsOn, []operatorv1.MachineManager{}, 0),
	Entry("AWS with its legacy per-platform gate off: nothing managed", operatorv1.ManagedBootImages{}, configv1.AWSPlatformType, gateSet{featuregates.ManagedBootImagesAWS: false}, []operatorv1.MachineManager{}, 0),
	Entry("legacy empty list: None for all", operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{}}, configv1.AWSPlatformType, cpmsOn, []operatorv1.MachineManager{mm(ms, operatorv1.None), mm(cpms, operatorv1.None)}, 0),
	Entry("CPMS All only: MachineSets keep their default", spec(mm(cpms, operatorv1.All)), configv1.AWSPlatformType, cpmsOn, []operatorv1.MachineManager{mm(ms, operatorv1.All), mm(cpms, operatorv1.All)}, 0),
	Entry("MachineSets None only: CPMS keeps its default", spec(mm(ms, operatorv1.None)), configv1.GCPPlatformType, cpmsOn, []operatorv1.MachineManager{mm(ms, operatorv1.None), mm(cpms, operatorv1.None)}, 0),
	Entry("MachineSets Partial and CPMS All merge", spec(mm(ms, operatorv1.Partial), mm(cpms, operatorv1.All)), configv1.AzurePlatformType, cpmsOn, []operatorv1.MachineManager{mm(ms, operatorv1.Partial), mm(cpms, operatorv1.All)}, 0),
	Entry("CPMS entry with the gate off is dropped", spec(mm(cpms, operatorv1.All)), configv1.AWSPlatformType, cpmsOff, []operatorv1.MachineManager{mm(ms, operatorv1.All)}, 0),
	Entry("CPMS Partial is None, with a problem", spec(mm(cpms, operatorv1.Partial)), configv1.AWSPlatformType, cpmsOn, []operatorv1.MachineManager{mm(ms, operatorv1.All), mm(cpms, operatorv1.None)}, 1),
	Entry("Cluster API gate on, no opinion: its entries are None (opt-in)", operatorv1.ManagedBootImages{}, configv1.AWSPlatformType, capiOn,
		[]operatorv1.MachineManager{mm(ms, operatorv1.All), capiMM(ms, operatorv1.None), capiMM(bootimage.MachineDeployments, operatorv1.None)}, 0),
	Entry("Cluster API entries in force as written", spec(capiMM(ms, operatorv1.Partial), capiMM(bootimage.MachineDeployments, operatorv1.All)), configv1.GCPPlatformType, capiOn,
		[]operatorv1.MachineManager{mm(ms, operatorv1.All), capiMM(ms, operatorv1.Partial), capiMM(bootimage.MachineDeployments, operatorv1.All)}, 0),
	Entry("Cluster API entries with the gate off are dropped", spec(capiMM(ms, operatorv1.All)), configv1.AWSPlatformType, cpmsOff, []operatorv1.MachineManager{mm(ms, operatorv1.All)}, 0),
	Entry("no Cluster API templates managed on vSphere", spec(capiMM(ms, operatorv1.All)), configv1.VSpherePlatformType, capiOn, []operatorv1.MachineManager{mm(ms, operatorv1.All)}, 0),
)

var capiOn = gateSet{featuregates.ManagedBootImagesAWSCAPI: true}

func capiMM(resource operatorv1.MachineManagerMachineSetsResourceType, mode operatorv1.MachineManagerSelectorMode) operatorv1.MachineManager {
	m := mm(resource, mode)
	m.APIGroup = bootimage.ClusterAPIGroup
	return m
}

var _ = DescribeTable("Selected",
	func(status operatorv1.ManagedBootImages, resource operatorv1.MachineManagerMachineSetsResourceType, labels map[string]string, want bool) {
		got, err := bootimage.Selected(status, resource, labels)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(Equal(want))
	},
	Entry("All", spec(mm(ms, operatorv1.All)), ms, nil, true),
	Entry("None", spec(mm(ms, operatorv1.None)), ms, nil, false),
	Entry("no entry", spec(mm(ms, operatorv1.All)), cpms, nil, false),
	Entry("Partial, labels match", spec(mm(ms, operatorv1.Partial)), ms, map[string]string{"role": "infra", "x": "y"}, true),
	Entry("Partial, labels differ", spec(mm(ms, operatorv1.Partial)), ms, map[string]string{"role": "worker"}, false),
	Entry("Partial never selects the CPMS", spec(mm(cpms, operatorv1.Partial)), cpms, map[string]string{"role": "infra"}, false),
)

var _ = Describe("Selected with a malformed selector", func() {
	It("fails, naming the resource", func() {
		bad := mm(ms, operatorv1.Partial)
		bad.Selection.Partial.MachineResourceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
		_, err := bootimage.Selected(spec(bad), ms, nil)
		Expect(err).To(MatchError(ContainSubstring("invalid machineResourceSelector for machinesets")))
	})
})

var _ = Describe("A Partial selector that does not parse", func() {
	It("is a problem naming the resource and the parse error, and selects nothing", func() {
		bad := mm(ms, operatorv1.Partial)
		bad.Selection.Partial = &operatorv1.PartialSelector{MachineResourceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "role", Operator: "Among", Values: []string{"infra"}}},
		}}
		eff := bootimage.EffectiveConfiguration(spec(bad), configv1.AWSPlatformType, cpmsOff)
		Expect(eff.Problems).To(ConsistOf(And(ContainSubstring("machineResourceSelector of machinesets is invalid"), ContainSubstring(`"Among" is not a valid label selector operator`))))
		selected, err := bootimage.Selected(eff.Status, ms, map[string]string{"role": "infra"})
		Expect(err).To(HaveOccurred())
		Expect(selected).To(BeFalse())
	})
})

var _ = Describe("SelectionKey", func() {
	It("changes with the selection of the resource, not with another resource's", func() {
		all := bootimage.SelectionKey(spec(mm(ms, operatorv1.All)), ms)
		Expect(all).NotTo(BeEmpty())
		Expect(bootimage.SelectionKey(spec(mm(ms, operatorv1.All), mm(cpms, operatorv1.All)), ms)).To(Equal(all))
		Expect(bootimage.SelectionKey(spec(mm(ms, operatorv1.Partial)), ms)).NotTo(Equal(all))
		Expect(bootimage.SelectionKey(spec(mm(cpms, operatorv1.All)), ms)).To(BeEmpty())
	})

	It("SelectionsKey changes with the Cluster API entries too", func() {
		capi := func(resource operatorv1.MachineManagerMachineSetsResourceType, mode operatorv1.MachineManagerSelectorMode) operatorv1.MachineManager {
			m := mm(resource, mode)
			m.APIGroup = bootimage.ClusterAPIGroup
			return m
		}
		machineAPI := bootimage.SelectionsKey(spec(mm(ms, operatorv1.All)))
		withCAPI := bootimage.SelectionsKey(spec(mm(ms, operatorv1.All), capi(ms, operatorv1.All)))
		Expect(withCAPI).NotTo(Equal(machineAPI))
		Expect(bootimage.SelectionsKey(spec(mm(ms, operatorv1.All), capi(ms, operatorv1.All), capi(bootimage.MachineDeployments, operatorv1.All)))).NotTo(Equal(withCAPI))
	})
})
