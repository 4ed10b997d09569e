package featuregates

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
)

// Reader gives the gates in force now. An error means they are unknown: gated controllers hold
// and say why. kube.GateSource (the live FeatureGate) and the adapters below satisfy it.
type Reader interface {
	Current(ctx context.Context) (Gates, error)
}

// Set is one release's gates as an embedder already holds them: library-go's
// featuregates.FeatureGate and the MCO's ctrlcommon.FeatureGatesHandler both have these methods.
type Set interface {
	Enabled(configv1.FeatureGateName) bool
	KnownFeatures() []configv1.FeatureGateName
}

// FromSet returns the gates of set for version. Only known gates are asked for (library-go's
// Enabled panics on others); a gate set does not know takes its compiled-in default, as a gate
// absent from the FeatureGate does.
func FromSet(version string, set Set) Gates {
	var enabled, disabled []configv1.FeatureGateName
	for _, name := range set.KnownFeatures() {
		if set.Enabled(name) {
			enabled = append(enabled, name)
		} else {
			disabled = append(disabled, name)
		}
	}
	return New(version, enabled, disabled)
}

// Static is a Reader of a gate set that does not change while the process runs: the MCO's
// FeatureGatesHandler, connected before its controllers start (the MCO restarts when gates change).
type Static struct {
	// Version labels the gates in logs and Events: the release they belong to.
	Version string
	Set     Set
}

// Current implements Reader.
func (s Static) Current(context.Context) (Gates, error) {
	if s.Set == nil {
		return Gates{}, fmt.Errorf("no feature gate set given")
	}
	return FromSet(s.Version, s.Set), nil
}

// FromAccess adapts library-go's featuregates.FeatureGateAccess (or anything with its
// CurrentFeatureGates method) without importing library-go: G is inferred from the method, e.g.
// featuregates.FromAccess(access, version). Until the first gates are observed it reports them
// unknown, so gated controllers hold.
func FromAccess[G Set](access interface{ CurrentFeatureGates() (G, error) }, version string) Reader {
	return accessReader[G]{access: access, version: version}
}

type accessReader[G Set] struct {
	access  interface{ CurrentFeatureGates() (G, error) }
	version string
}

func (a accessReader[G]) Current(context.Context) (Gates, error) {
	set, err := a.access.CurrentFeatureGates()
	if err != nil {
		return Gates{}, fmt.Errorf("feature gates not observed yet: %w", err)
	}
	return FromSet(a.version, set), nil
}
