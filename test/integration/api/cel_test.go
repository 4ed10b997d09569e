package api_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// These specs prove the ground is real: the CEL rules of the shipped CRDs are enforced.
var _ = Describe("MachineConfiguration CRD validation", func() {
	// On AWS, so that the admission policies, when another spec installed them, allow all of these.
	BeforeEach(func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.Infrastructure(configv1.AWSPlatformType))).To(Succeed())
	})
	AfterEach(func() {
		Expect(k8s.DeleteAllOf(ctx, &operatorv1.MachineConfiguration{})).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &configv1.Infrastructure{})).To(Succeed())
	})

	create := func(mode operatorv1.MachineManagerSelectorMode) error {
		var selector *metav1.LabelSelector
		if mode == operatorv1.Partial {
			selector = &metav1.LabelSelector{MatchLabels: map[string]string{"role": "infra"}}
		}
		mc := fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{
			fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, mode, selector),
		}})
		return fixtures.Create(ctx, k8s, mc)
	}

	It("rejects Partial selection for controlplanemachinesets", func() {
		err := create(operatorv1.Partial)
		Expect(err).To(MatchError(ContainSubstring("Only All or None selection mode is permitted for ControlPlaneMachineSets")))
	})

	DescribeTable("accepts the CPMS modes All and None", func(mode operatorv1.MachineManagerSelectorMode) {
		Expect(create(mode)).To(Succeed())
	},
		Entry("All", operatorv1.All),
		Entry("None", operatorv1.None),
	)

	It("accepts Partial selection for machinesets", func() {
		mc := fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{
			fixtures.MachineManager(operatorv1.MachineSets, operatorv1.Partial, &metav1.LabelSelector{MatchLabels: map[string]string{"role": "infra"}}),
		}})
		Expect(fixtures.Create(ctx, k8s, mc)).To(Succeed())
	})
})

// openshift/api PR #2990 (gate ManagedBootImagesAWSCAPI), carried by manifests/capi.go on the
// TechPreviewNoUpgrade CRD this suite serves.
var _ = Describe("MachineConfiguration CRD validation of Cluster API entries", func() {
	BeforeEach(func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.Infrastructure(configv1.AWSPlatformType))).To(Succeed())
	})
	AfterEach(func() {
		Expect(k8s.DeleteAllOf(ctx, &operatorv1.MachineConfiguration{})).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &configv1.Infrastructure{})).To(Succeed())
	})

	DescribeTable("item rules",
		func(entries []operatorv1.MachineManager, denial string) {
			err := fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: entries}))
			if denial == "" {
				Expect(err).NotTo(HaveOccurred())
				return
			}
			Expect(err).To(MatchError(ContainSubstring(denial)))
		},
		Entry("machinedeployments in machine.openshift.io is refused",
			[]operatorv1.MachineManager{fixtures.MachineManager(manifests.MachineDeploymentsResource, operatorv1.All, nil)},
			"the machinedeployments resource is only supported in the cluster.x-k8s.io API group"),
		Entry("controlplanemachinesets in cluster.x-k8s.io is refused",
			[]operatorv1.MachineManager{capiManager(operatorv1.ControlPlaneMachineSets, operatorv1.All, nil)},
			"the controlplanemachinesets resource is only supported in the machine.openshift.io API group"),
		Entry("Cluster API MachineSets and MachineDeployments, All, beside the Machine API entries", []operatorv1.MachineManager{
			fixtures.MachineManager(operatorv1.MachineSets, operatorv1.All, nil),
			fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, operatorv1.None, nil),
			capiManager(operatorv1.MachineSets, operatorv1.All, nil),
			capiManager(manifests.MachineDeploymentsResource, operatorv1.All, nil),
		}, ""),
		Entry("Cluster API MachineSets and MachineDeployments, Partial", []operatorv1.MachineManager{
			capiManager(operatorv1.MachineSets, operatorv1.Partial, &metav1.LabelSelector{MatchLabels: map[string]string{"role": "infra"}}),
			capiManager(manifests.MachineDeploymentsResource, operatorv1.Partial, &metav1.LabelSelector{}),
		}, ""),
		Entry("one entry per resource and group", []operatorv1.MachineManager{
			capiManager(operatorv1.MachineSets, operatorv1.All, nil),
			capiManager(operatorv1.MachineSets, operatorv1.None, nil),
		}, "Duplicate value"),
	)
})

// capiManager is a Cluster API (cluster.x-k8s.io) entry.
func capiManager(resource operatorv1.MachineManagerMachineSetsResourceType, mode operatorv1.MachineManagerSelectorMode, selector *metav1.LabelSelector) operatorv1.MachineManager {
	m := fixtures.MachineManager(resource, mode, selector)
	m.APIGroup = manifests.CAPIGroup
	return m
}
