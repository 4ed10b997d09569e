// Package featuregates reads the cluster's feature gates for the running release version.
//
// Gates are read from FeatureGate/cluster on every call, through whatever reader the caller passes
// (the manager's cache in the operator), so a change to the FeatureGate takes effect without a
// restart.
package featuregates

import (
	"context"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The gates this operator reads.
const (
	ManagedBootImagesCPMS    configv1.FeatureGateName = "ManagedBootImagesCPMS"
	BootImageSkewEnforcement configv1.FeatureGateName = "BootImageSkewEnforcement"
	// The per-platform gates of older releases. They went GA and were removed from newer ones.
	ManagedBootImages        configv1.FeatureGateName = "ManagedBootImages" // GCP
	ManagedBootImagesAWS     configv1.FeatureGateName = "ManagedBootImagesAWS"
	ManagedBootImagesAzure   configv1.FeatureGateName = "ManagedBootImagesAzure"
	ManagedBootImagesVSphere configv1.FeatureGateName = "ManagedBootImagesvSphere"
)

// Defaults is what a gate means when the cluster's FeatureGate lists it neither enabled nor
// disabled. The per-platform gates were removed once GA, so their absence means on. The CPMS gate
// stays off when absent: a wrong "on" could replace the control plane. Skew enforcement blocks
// upgrades, so it too needs an explicit "on".
var Defaults = map[configv1.FeatureGateName]bool{
	ManagedBootImagesCPMS:    false,
	BootImageSkewEnforcement: false,
	ManagedBootImages:        true,
	ManagedBootImagesAWS:     true,
	ManagedBootImagesAzure:   true,
	ManagedBootImagesVSphere: true,
}

// Gates is the set of feature gates in force for one release version.
type Gates struct {
	Version  string
	enabled  map[configv1.FeatureGateName]bool
	disabled map[configv1.FeatureGateName]bool
}

// New returns the gates for version with the given enabled and disabled names.
func New(version string, enabled, disabled []configv1.FeatureGateName) Gates {
	g := Gates{Version: version, enabled: map[configv1.FeatureGateName]bool{}, disabled: map[configv1.FeatureGateName]bool{}}
	for _, name := range enabled {
		g.enabled[name] = true
	}
	for _, name := range disabled {
		g.disabled[name] = true
	}
	return g
}

// Enabled reports whether gate is on: as listed by the cluster, else its compiled-in default.
func (g Gates) Enabled(gate configv1.FeatureGateName) bool {
	switch {
	case g.enabled[gate]:
		return true
	case g.disabled[gate]:
		return false
	default:
		return Defaults[gate]
	}
}

// String lists the state of the gates this operator reads, in a stable order, for logs and events.
func (g Gates) String() string {
	names := make([]string, 0, len(Defaults))
	for name := range Defaults {
		names = append(names, string(name))
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		state := "off"
		if g.Enabled(configv1.FeatureGateName(name)) {
			state = "on"
		}
		parts[i] = name + "=" + state
	}
	return strings.Join(parts, ",")
}

// FromFeatureGate returns the gates of fg for version. It fails, naming the object and the
// problem, when fg has no entry for version.
func FromFeatureGate(fg *configv1.FeatureGate, version string) (Gates, error) {
	if version == "" {
		return Gates{}, fmt.Errorf("release version unknown: set --release-version or RELEASE_VERSION, or wait for ClusterVersion/version status.desired.version")
	}
	for _, details := range fg.Status.FeatureGates {
		if details.Version != version {
			continue
		}
		return New(version, names(details.Enabled), names(details.Disabled)), nil
	}
	return Gates{}, fmt.Errorf("FeatureGate/%s has no status.featureGates entry for release version %q", fg.Name, version)
}

func names(attrs []configv1.FeatureGateAttributes) []configv1.FeatureGateName {
	out := make([]configv1.FeatureGateName, len(attrs))
	for i, a := range attrs {
		out[i] = a.Name
	}
	return out
}

// Source reads the live gates through a client.Reader.
type Source struct {
	Reader client.Reader
	// ReleaseVersion is the running release version; when empty, ClusterVersion/version
	// status.desired.version is used.
	ReleaseVersion string
}

// Current returns the gates in force now. An error means the gates are unknown and nothing gated
// may act.
func (s Source) Current(ctx context.Context) (Gates, error) {
	version, err := s.releaseVersion(ctx)
	if err != nil {
		return Gates{}, err
	}
	fg := &configv1.FeatureGate{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Name: "cluster"}, fg); err != nil {
		if apierrors.IsNotFound(err) {
			return Gates{}, fmt.Errorf("FeatureGate/cluster not found: feature gates unknown")
		}
		return Gates{}, fmt.Errorf("reading FeatureGate/cluster: %w", err)
	}
	return FromFeatureGate(fg, version)
}

func (s Source) releaseVersion(ctx context.Context) (string, error) {
	if s.ReleaseVersion != "" {
		return s.ReleaseVersion, nil
	}
	cv := &configv1.ClusterVersion{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Name: "version"}, cv); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("release version unknown: no --release-version or RELEASE_VERSION and ClusterVersion/version not found")
		}
		return "", fmt.Errorf("reading ClusterVersion/version: %w", err)
	}
	if cv.Status.Desired.Version == "" {
		return "", fmt.Errorf("release version unknown: ClusterVersion/version has no status.desired.version")
	}
	return cv.Status.Desired.Version, nil
}
