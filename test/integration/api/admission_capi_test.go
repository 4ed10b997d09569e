package api_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// clusterAPIAdmissionSpecs are the shipped policies' specs for the Cluster API entries (gate
// ManagedBootImagesAWSCAPI), written as merge patches, as kubectl sends them. They run inside the
// "Shipped ValidatingAdmissionPolicies" container, under its one install of the policies: the API
// server did not enforce policies deleted and created again under the same names within 30 s.
func clusterAPIAdmissionSpecs() {
	Describe("and Cluster API entries", clusterAPIAdmission)
}

func clusterAPIAdmission() {
	const (
		msAll       = `{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"All"}}`
		capiMSAll   = `{"resource":"machinesets","apiGroup":"cluster.x-k8s.io","selection":{"mode":"All"}}`
		capiMSNone  = `{"resource":"machinesets","apiGroup":"cluster.x-k8s.io","selection":{"mode":"None"}}`
		capiMDAll   = `{"resource":"machinedeployments","apiGroup":"cluster.x-k8s.io","selection":{"mode":"All"}}`
		capiMDNone  = `{"resource":"machinedeployments","apiGroup":"cluster.x-k8s.io","selection":{"mode":"None"}}`
		capiMDPartl = `{"resource":"machinedeployments","apiGroup":"cluster.x-k8s.io","selection":{"mode":"Partial","partial":{"machineResourceSelector":{"matchLabels":{"a":"b"}}}}}`
	)
	mc := func() *operatorv1.MachineConfiguration {
		return &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	}
	managersPatch := func(entries ...string) client.Patch {
		return client.RawPatch(types.MergePatchType, []byte(`{"spec":{"managedBootImages":{"machineManagers":[`+strings.Join(entries, ",")+`]}}}`))
	}
	setManagers := func(entries ...string) func() error {
		return func() error { return k8s.Patch(ctx, mc(), managersPatch(entries...)) }
	}
	// expectDenied waits, with dry runs, until the API server denies the entries with denial, then
	// sends them for real. A real patch let through while the policy still saw the previous spec's
	// Infrastructure would be stored, and the ratchet would allow it from then on.
	expectDenied := func(denial string, entries ...string) {
		GinkgoHelper()
		Eventually(func() error {
			return k8s.Patch(ctx, mc(), managersPatch(entries...), client.DryRunAll)
		}).Should(MatchError(ContainSubstring(denial)))
		Expect(setManagers(entries...)()).To(MatchError(ContainSubstring(denial)))
	}
	// start creates Infrastructure for platform and an empty MachineConfiguration/cluster.
	start := func(infra *configv1.Infrastructure) {
		GinkgoHelper()
		Expect(fixtures.Create(ctx, k8s, infra)).To(Succeed())
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(nil))).To(Succeed())
	}

	DescribeTable("opting in by platform",
		func(infra *configv1.Infrastructure, denial string) {
			start(infra)
			if denial == "" {
				Eventually(setManagers(capiMSAll, capiMDAll)).Should(Succeed())
				return
			}
			expectDenied(denial, capiMSAll, capiMDAll)
			Expect(setManagers(capiMSNone, capiMDNone)()).To(Succeed(), "opting out is always allowed")
		},
		Entry("AWS", fixtures.Infrastructure(configv1.AWSPlatformType), ""),
		Entry("GCP", fixtures.Infrastructure(configv1.GCPPlatformType), ""),
		Entry("Azure", fixtures.Infrastructure(configv1.AzurePlatformType), ""),
		Entry("vSphere, whose Machine API MachineSets are managed", fixtures.Infrastructure(configv1.VSpherePlatformType),
			"boot image updates for Cluster API (cluster.x-k8s.io) machinesets and machinedeployments are only supported on AWS, Azure and GCP, and this cluster runs on VSphere"),
		Entry("Azure Stack Hub", fixtures.AzureStackHubInfrastructure(),
			"boot image updates for Cluster API (cluster.x-k8s.io) machinesets and machinedeployments are only supported on AWS, Azure and GCP, and this cluster runs on Azure Stack Hub"),
	)

	It("counts Cluster API entries like MachineSets while skew enforcement is Automatic", func() {
		start(fixtures.Infrastructure(configv1.AWSPlatformType))
		Eventually(setManagers(msAll, capiMDNone)).Should(Succeed())
		// The operator's status: Automatic, as when MachineSets are managed with All.
		status := `{"status":{"managedBootImagesStatus":{"machineManagers":[` + msAll + `]},` +
			`"bootImageSkewEnforcementStatus":{"mode":"Automatic","automatic":{"ocpVersion":"4.20.0"}}}}`
		Expect(k8s.Status().Patch(ctx, mc(), client.RawPatch(types.MergePatchType, []byte(status)))).To(Succeed())

		const denial = "when skew enforcement is in Automatic mode, any Cluster API (cluster.x-k8s.io) MachineSet or MachineDeployment MachineManager must use selection mode 'All'"
		expectDenied(denial, msAll, capiMDNone, capiMSNone) // a new None entry
		Expect(setManagers(msAll, capiMDPartl)()).To(MatchError(ContainSubstring(denial)), "a changed entry, to Partial")
		Expect(setManagers(msAll, capiMDNone, capiMSAll)()).To(Succeed(), "an entry set before Automatic stays; a new All is fine")
		Expect(setManagers(msAll, capiMDAll, capiMSAll)()).To(Succeed())
	})
}
