// Package featuregates says which of the operator's feature gates are on for a release version,
// from a FeatureGate object. It is a leaf the domain can import: reading the live FeatureGate is
// kube.GateSource's job.
package featuregates

import (
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/api/features"
)

// The gates of the current releases this operator reads, as openshift/api names them.
var (
	ManagedBootImagesCPMS    = features.FeatureGateManagedBootImagesCPMS
	BootImageSkewEnforcement = features.FeatureGateBootImageSkewEnforcement
)

// The per-platform gates of older releases. They went GA and were removed from openshift/api, so
// their names are kept here.
const (
	ManagedBootImages        configv1.FeatureGateName = "ManagedBootImages" // GCP
	ManagedBootImagesAWS     configv1.FeatureGateName = "ManagedBootImagesAWS"
	ManagedBootImagesAzure   configv1.FeatureGateName = "ManagedBootImagesAzure"
	ManagedBootImagesVSphere configv1.FeatureGateName = "ManagedBootImagesvSphere"
)

// ManagedBootImagesAWSCAPI turns on boot image updates of Cluster API MachineSets and
// MachineDeployments (openshift/api PR #2990; TechPreviewNoUpgrade and DevPreviewNoUpgrade).
// openshift/api gates only AWS with it; GCP and Azure follow it until they have their own. No
// openshift/api version this module can require has it yet; TestCAPIGateNotInOpenShiftAPI fails
// once one does, and then the name comes from openshift/api/features.
const ManagedBootImagesAWSCAPI configv1.FeatureGateName = "ManagedBootImagesAWSCAPI"

// Defaults is what a gate means when the cluster's FeatureGate lists it neither enabled nor
// disabled. The per-platform gates were removed once GA, so their absence means on. The CPMS gate
// stays off when absent: a wrong "on" could replace the control plane. Skew enforcement blocks
// upgrades, so it too needs an explicit "on". So does the Cluster API gate: a tech-preview feature.
var Defaults = map[configv1.FeatureGateName]bool{
	ManagedBootImagesCPMS:    false,
	BootImageSkewEnforcement: false,
	ManagedBootImagesAWSCAPI: false,
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
