package featuregates_test

import (
	"slices"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/api/features"

	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

func TestFeatureGates(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "featuregates")
}

var _ = Describe("Gates", func() {
	gate := fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, "4.20.3",
		[]configv1.FeatureGateName{fg.ManagedBootImagesCPMS},
		[]configv1.FeatureGateName{fg.BootImageSkewEnforcement, fg.ManagedBootImagesAWS})

	DescribeTable("Enabled for the running version",
		func(name configv1.FeatureGateName, want bool) {
			gates, err := fg.FromFeatureGate(gate, "4.20.3")
			Expect(err).NotTo(HaveOccurred())
			Expect(gates.Enabled(name)).To(Equal(want))
		},
		Entry("listed enabled", fg.ManagedBootImagesCPMS, true),
		Entry("listed disabled", fg.BootImageSkewEnforcement, false),
		Entry("a GA gate listed disabled stays disabled", fg.ManagedBootImagesAWS, false),
		Entry("a removed GA gate falls back to on", fg.ManagedBootImagesAzure, true),
		Entry("a removed GA gate falls back to on (vSphere)", fg.ManagedBootImagesVSphere, true),
		Entry("an unknown gate is off", configv1.FeatureGateName("SomethingElse"), false),
		Entry("the Cluster API gate is off when absent", fg.ManagedBootImagesAWSCAPI, false),
	)

	It("falls back to off for the CPMS gate when absent", func() {
		gates, err := fg.FromFeatureGate(fixtures.FeatureGate(configv1.Default, "4.20.3", nil, nil), "4.20.3")
		Expect(err).NotTo(HaveOccurred())
		Expect(gates.Enabled(fg.ManagedBootImagesCPMS)).To(BeFalse())
		Expect(gates.Enabled(fg.ManagedBootImages)).To(BeTrue())
	})

	It("fails, naming the object and the version, when no entry matches", func() {
		_, err := fg.FromFeatureGate(gate, "4.21.0")
		Expect(err).To(MatchError(`FeatureGate/cluster has no status.featureGates entry for release version "4.21.0"`))
	})

	It("prints a stable summary", func() {
		gates, _ := fg.FromFeatureGate(gate, "4.20.3")
		Expect(gates.String()).To(Equal("BootImageSkewEnforcement=off,ManagedBootImages=on,ManagedBootImagesAWS=off,ManagedBootImagesAWSCAPI=off,ManagedBootImagesAzure=on,ManagedBootImagesCPMS=on,ManagedBootImagesvSphere=on"))
	})
})

// TestCAPIGateNotInOpenShiftAPI fails once the pinned openshift/api knows ManagedBootImagesAWSCAPI:
// then take the name from openshift/api/features (and drop manifests/capi.go, see
// manifests.TestCAPIPatchStillNeeded).
func TestCAPIGateNotInOpenShiftAPI(t *testing.T) {
	for _, profiles := range features.AllFeatureSets() {
		for _, sets := range profiles {
			for featureSet, gates := range sets {
				for _, g := range slices.Concat(gates.Enabled, gates.Disabled) {
					if g.FeatureGateAttributes.Name == fg.ManagedBootImagesAWSCAPI {
						t.Fatalf("openshift/api/features has %s (feature set %s): use its name instead of featuregates' constant", g.FeatureGateAttributes.Name, featureSet)
					}
				}
			}
		}
	}
}
