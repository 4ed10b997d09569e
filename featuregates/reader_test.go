package featuregates_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
)

// strictSet behaves as library-go's featuregates.FeatureGate: Enabled panics on an unknown gate.
type strictSet struct{ enabled, disabled []configv1.FeatureGateName }

func (s strictSet) Enabled(name configv1.FeatureGateName) bool {
	switch {
	case slices.Contains(s.enabled, name):
		return true
	case slices.Contains(s.disabled, name):
		return false
	}
	panic(fmt.Sprintf("feature %q is not registered in FeatureGates", name))
}

func (s strictSet) KnownFeatures() []configv1.FeatureGateName {
	return append(slices.Clone(s.enabled), s.disabled...)
}

// strictAccess has the shape of library-go's FeatureGateAccess.CurrentFeatureGates, returning
// an interface type as library-go does.
type strictAccess struct{ set fg.Set }

func (a strictAccess) CurrentFeatureGates() (fg.Set, error) {
	if a.set == nil {
		return nil, errors.New("featureGates not yet observed")
	}
	return a.set, nil
}

var _ = Describe("Gates an embedder holds", func() {
	set := strictSet{enabled: []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, disabled: []configv1.FeatureGateName{fg.BootImageSkewEnforcement}}

	It("take a set's known gates and the compiled-in default for the rest, never asking about an unknown gate", func() {
		gates, err := fg.Static{Version: "4.20.3", Set: set}.Current(context.Background())
		Expect(err).NotTo(HaveOccurred())
		Expect(gates.Version).To(Equal("4.20.3"))
		Expect(gates.Enabled(fg.ManagedBootImagesCPMS)).To(BeTrue())
		Expect(gates.Enabled(fg.BootImageSkewEnforcement)).To(BeFalse())
		Expect(gates.Enabled(fg.ManagedBootImagesAWS)).To(BeTrue(), "removed once GA: on")
	})

	It("are unknown until library-go's accessor has observed them", func() {
		_, err := fg.FromAccess(strictAccess{}, "4.20.3").Current(context.Background())
		Expect(err).To(MatchError(ContainSubstring("feature gates not observed yet")))

		gates, err := fg.FromAccess(strictAccess{set: set}, "4.20.3").Current(context.Background())
		Expect(err).NotTo(HaveOccurred())
		Expect(gates.Enabled(fg.ManagedBootImagesCPMS)).To(BeTrue())
	})

	It("are unknown when no set is given", func() {
		_, err := fg.Static{Version: "4.20.3"}.Current(context.Background())
		Expect(err).To(HaveOccurred())
	})
})
