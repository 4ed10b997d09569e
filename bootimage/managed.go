// Package bootimage decides boot image updates: which machine managers are selected, and what each
// MachineSet's boot image should be. It is pure: API objects in, decisions out.
package bootimage

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// Gates says which feature gates are on; featuregates.Gates satisfies it.
type Gates interface {
	Enabled(configv1.FeatureGateName) bool
}

// MachineSetsSupported reports whether MachineSet boot images are managed on platform.
func MachineSetsSupported(platform configv1.PlatformType, gates Gates) bool {
	p, ok := platforms[platform]
	return ok && (p.Traits().MachineSetGate == "" || gates.Enabled(p.Traits().MachineSetGate))
}

// CPMSSupported reports whether the ControlPlaneMachineSet boot image is managed on platform.
func CPMSSupported(platform configv1.PlatformType, gates Gates) bool {
	p, ok := platforms[platform]
	return ok && p.Traits().ControlPlane && gates.Enabled(featuregates.ManagedBootImagesCPMS)
}

// SupportedResources lists the machine manager resources managed on platform, in status order.
func SupportedResources(platform configv1.PlatformType, gates Gates) []operatorv1.MachineManagerMachineSetsResourceType {
	var out []operatorv1.MachineManagerMachineSetsResourceType
	if MachineSetsSupported(platform, gates) {
		out = append(out, operatorv1.MachineSets)
	}
	if CPMSSupported(platform, gates) {
		out = append(out, operatorv1.ControlPlaneMachineSets)
	}
	return out
}

// IsLegacyOptOut reports whether spec is the legacy opt-out: machineManagers present and empty.
// An absent list (nil) is "no opinion".
func IsLegacyOptOut(spec operatorv1.ManagedBootImages) bool {
	return spec.MachineManagers != nil && len(spec.MachineManagers) == 0
}

// Effective is the boot image configuration in force, and the problems found in the spec.
type Effective struct {
	Status operatorv1.ManagedBootImages
	// Problems are spec settings that were overridden, each saying what to change.
	Problems []string
}

// EffectiveConfiguration computes status.managedBootImagesStatus from the spec: per supported
// resource, the spec's entry when present, else the platform default (MachineSets All, the CPMS
// None). The legacy empty list means None for every resource. A Partial CPMS entry, which only
// CRDs that predate the CEL rule let through, is None.
func EffectiveConfiguration(spec operatorv1.ManagedBootImages, platform configv1.PlatformType, gates Gates) Effective {
	var eff Effective
	eff.Status.MachineManagers = []operatorv1.MachineManager{}
	for _, resource := range SupportedResources(platform, gates) {
		mm := operatorv1.MachineManager{Resource: resource, APIGroup: operatorv1.MachineAPI, Selection: operatorv1.MachineManagerSelector{Mode: defaultMode(resource)}}
		if IsLegacyOptOut(spec) {
			mm.Selection.Mode = operatorv1.None
		}
		if entry, ok := findEntry(spec.MachineManagers, resource); ok {
			mm.Selection = *entry.Selection.DeepCopy()
		}
		if resource == operatorv1.ControlPlaneMachineSets && mm.Selection.Mode == operatorv1.Partial {
			mm.Selection = operatorv1.MachineManagerSelector{Mode: operatorv1.None}
			eff.Problems = append(eff.Problems, "spec.managedBootImages: selection mode Partial is not permitted for controlplanemachinesets (the ControlPlaneMachineSet is a singleton) and is treated as None; set selection.mode to All or None")
		}
		if problem := selectorProblem(mm); problem != "" {
			eff.Problems = append(eff.Problems, problem)
		}
		eff.Status.MachineManagers = append(eff.Status.MachineManagers, mm)
	}
	if ClusterAPISupported(platform, gates) {
		// Opt-in: a MachineDeployment entry replaces nodes on every boot image change.
		for _, resource := range []operatorv1.MachineManagerMachineSetsResourceType{operatorv1.MachineSets, MachineDeployments} {
			mm := operatorv1.MachineManager{Resource: resource, APIGroup: ClusterAPIGroup, Selection: operatorv1.MachineManagerSelector{Mode: operatorv1.None}}
			if entry, ok := findEntryIn(spec.MachineManagers, ClusterAPIGroup, resource); ok {
				mm.Selection = *entry.Selection.DeepCopy()
			}
			if problem := selectorProblem(mm); problem != "" {
				eff.Problems = append(eff.Problems, problem)
			}
			eff.Status.MachineManagers = append(eff.Status.MachineManagers, mm)
		}
	}
	return eff
}

// ClusterAPISupported reports whether Cluster API MachineSets and MachineDeployments are managed
// on platform: gate ManagedBootImagesAWSCAPI on, and a template kind this operator updates there.
func ClusterAPISupported(platform configv1.PlatformType, gates Gates) bool {
	p, ok := platforms[platform]
	return ok && p.Traits().TemplateKind != "" && gates.Enabled(featuregates.ManagedBootImagesAWSCAPI)
}

// selectorProblem says what is wrong with a Partial entry's selector, "" when it is usable. Such an
// entry selects nothing: an admin who meant to opt some MachineSets in must be told why none are.
func selectorProblem(mm operatorv1.MachineManager) string {
	if mm.Selection.Mode != operatorv1.Partial || mm.Selection.Partial == nil || mm.Selection.Partial.MachineResourceSelector == nil {
		return ""
	}
	if _, err := metav1.LabelSelectorAsSelector(mm.Selection.Partial.MachineResourceSelector); err != nil {
		return fmt.Sprintf("spec.managedBootImages: the Partial machineResourceSelector of %s is invalid, so it selects nothing: %v", mm.Resource, err)
	}
	return ""
}

func defaultMode(resource operatorv1.MachineManagerMachineSetsResourceType) operatorv1.MachineManagerSelectorMode {
	if resource == operatorv1.MachineSets {
		return operatorv1.All
	}
	return operatorv1.None // the CPMS is opt-in
}

func findEntry(entries []operatorv1.MachineManager, resource operatorv1.MachineManagerMachineSetsResourceType) (operatorv1.MachineManager, bool) {
	return findEntryIn(entries, operatorv1.MachineAPI, resource)
}

func findEntryIn(entries []operatorv1.MachineManager, group operatorv1.MachineManagerMachineSetsAPIGroupType, resource operatorv1.MachineManagerMachineSetsResourceType) (operatorv1.MachineManager, bool) {
	for _, e := range entries {
		if e.Resource == resource && e.APIGroup == group {
			return e, true
		}
	}
	return operatorv1.MachineManager{}, false
}

// isSelected reports whether an object of resource with objectLabels is selected for boot image
// updates by the effective status. A resource without an entry is not selected.
func isSelected(status operatorv1.ManagedBootImages, resource operatorv1.MachineManagerMachineSetsResourceType, objectLabels map[string]string) (bool, error) {
	return selectedIn(status, operatorv1.MachineAPI, resource, objectLabels)
}

// selectedIn is Selected for the entry of resource in group (machine.openshift.io or
// cluster.x-k8s.io).
func selectedIn(status operatorv1.ManagedBootImages, group operatorv1.MachineManagerMachineSetsAPIGroupType, resource operatorv1.MachineManagerMachineSetsResourceType, objectLabels map[string]string) (bool, error) {
	entry, ok := findEntryIn(status.MachineManagers, group, resource)
	if !ok {
		return false, nil
	}
	switch entry.Selection.Mode {
	case operatorv1.All:
		return true, nil
	case operatorv1.Partial:
		if resource == operatorv1.ControlPlaneMachineSets || entry.Selection.Partial == nil || entry.Selection.Partial.MachineResourceSelector == nil {
			return false, nil
		}
		selector, err := metav1.LabelSelectorAsSelector(entry.Selection.Partial.MachineResourceSelector)
		if err != nil {
			return false, fmt.Errorf("invalid machineResourceSelector for %s: %w", resource, err)
		}
		return selector.Matches(labels.Set(objectLabels)), nil
	default:
		return false, nil
	}
}

// whyNotSelected says why an object of resource is not selected by status: no entry, mode None, a
// Partial selector its labels miss, or a Partial the singleton ControlPlaneMachineSet cannot take.
func whyNotSelected(status operatorv1.ManagedBootImages, group operatorv1.MachineManagerMachineSetsAPIGroupType, resource operatorv1.MachineManagerMachineSetsResourceType) string {
	entry, ok := findEntryIn(status.MachineManagers, group, resource)
	switch {
	case !ok:
		return "it has no entry for them"
	case entry.Selection.Mode == operatorv1.Partial && resource == operatorv1.ControlPlaneMachineSets:
		return "mode Partial, which the singleton ControlPlaneMachineSet cannot take, so it counts as None; set the spec's selection mode to All or None"
	case entry.Selection.Mode == operatorv1.Partial:
		return "its labels do not match the Partial machineResourceSelector"
	}
	return fmt.Sprintf("mode %s", entry.Selection.Mode)
}
