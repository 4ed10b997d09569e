package controllers

import (
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// The status MachineConfigurationReconciler writes, composed from its inputs alone.
func TestComposeMachineConfigurationStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-time.Hour))
	// Every platform's MachineSet gate, the CPMS's, and skew enforcement when skew is true.
	gates := func(skew bool, extra ...configv1.FeatureGateName) fg.Gates {
		on := append([]configv1.FeatureGateName{fg.ManagedBootImages, fg.ManagedBootImagesAWS, fg.ManagedBootImagesAzure, fg.ManagedBootImagesVSphere}, extra...)
		var off []configv1.FeatureGateName
		if skew {
			on = append(on, fg.BootImageSkewEnforcement)
		} else {
			off = append(off, fg.BootImageSkewEnforcement)
		}
		return fg.New(fixtures.ReleaseVersion, on, off)
	}
	machineSets := func(mode operatorv1.MachineManagerSelectorMode) operatorv1.MachineManager {
		return operatorv1.MachineManager{Resource: operatorv1.MachineSets, APIGroup: operatorv1.MachineAPI, Selection: operatorv1.MachineManagerSelector{Mode: mode}}
	}
	cpmsNone := operatorv1.MachineManager{Resource: operatorv1.ControlPlaneMachineSets, APIGroup: operatorv1.MachineAPI, Selection: operatorv1.MachineManagerSelector{Mode: operatorv1.None}}
	mcAt := func(generation int64) *operatorv1.MachineConfiguration {
		mc := fixtures.MachineConfiguration(nil)
		mc.Generation = generation
		return mc
	}
	// inputs are those of a settled AWS cluster at generation 2, each case changing some.
	inputs := func(change func(*machineConfigurationInputs)) machineConfigurationInputs {
		in := machineConfigurationInputs{
			MC:             mcAt(2),
			Infrastructure: fixtures.Infrastructure(configv1.AWSPlatformType),
			Gates:          gates(false),
			ClusterVersion: fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			BootImages:     fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion),
			Progress:       status.Progress{MachineSets: status.Tally{Total: 1, Decided: 1, Reconciled: 1}},
			Now:            now,
		}
		if change != nil {
			change(&in)
		}
		in.Selection = selection(in.MC, bootimage.PlatformOf(in.Infrastructure), in.Gates)
		return in
	}
	condition := func(t *testing.T, got machineConfigurationStatus, typ string) metav1.Condition {
		t.Helper()
		c := meta.FindStatusCondition(got.Want.Status.Conditions, typ)
		if c == nil {
			t.Fatalf("no condition %s in %+v", typ, got.Want.Status.Conditions)
		}
		return *c
	}
	selectionIs := func(want ...operatorv1.MachineManager) func(*testing.T, machineConfigurationStatus) {
		return func(t *testing.T, got machineConfigurationStatus) {
			t.Helper()
			if g := got.Want.Status.ManagedBootImagesStatus.MachineManagers; !equality.Semantic.DeepEqual(g, want) {
				t.Errorf("managedBootImagesStatus.machineManagers = %+v, want %+v", g, want)
			}
		}
	}
	supported := func(want metav1.ConditionStatus, reason string) func(*testing.T, machineConfigurationStatus) {
		return func(t *testing.T, got machineConfigurationStatus) {
			t.Helper()
			if c := condition(t, got, status.ConditionBootImageUpdateSupported); c.Status != want || c.Reason != reason {
				t.Errorf("Supported = %s %s (%s), want %s %s", c.Status, c.Reason, c.Message, want, reason)
			}
		}
	}
	onPlatform := func(p configv1.PlatformType) func(*machineConfigurationInputs) {
		return func(in *machineConfigurationInputs) { in.Infrastructure = fixtures.Infrastructure(p) }
	}
	degradedWas := func(in *machineConfigurationInputs) {
		in.MC.Status.Conditions = []metav1.Condition{{Type: status.ConditionBootImageUpdateDegraded, Status: metav1.ConditionTrue, Reason: bootimage.ReasonCloudLookupFailed,
			Message: "MachineSet a: cloud lookup failed", ObservedGeneration: 1, LastTransitionTime: earlier}}
	}

	cases := []struct {
		name   string
		in     machineConfigurationInputs
		checks []func(*testing.T, machineConfigurationStatus)
	}{
		{"AWS: MachineSets All, the CPMS not without its gate", inputs(nil), []func(*testing.T, machineConfigurationStatus){
			selectionIs(machineSets(operatorv1.All)), supported(metav1.ConditionTrue, status.ReasonAsExpected),
		}},
		{"AWS with gate ManagedBootImagesCPMS: the CPMS None by default", inputs(func(in *machineConfigurationInputs) { in.Gates = gates(false, fg.ManagedBootImagesCPMS) }), []func(*testing.T, machineConfigurationStatus){
			selectionIs(machineSets(operatorv1.All), cpmsNone),
		}},
		{"GCP", inputs(onPlatform(configv1.GCPPlatformType)), []func(*testing.T, machineConfigurationStatus){selectionIs(machineSets(operatorv1.All))}},
		{"Azure", inputs(onPlatform(configv1.AzurePlatformType)), []func(*testing.T, machineConfigurationStatus){selectionIs(machineSets(operatorv1.All))}},
		{"vSphere: MachineSets only, even with the CPMS gate", inputs(func(in *machineConfigurationInputs) {
			in.Infrastructure, in.Gates = fixtures.Infrastructure(configv1.VSpherePlatformType), gates(false, fg.ManagedBootImagesCPMS)
		}), []func(*testing.T, machineConfigurationStatus){selectionIs(machineSets(operatorv1.All))}},
		{"AWS with its MachineSet gate off: nothing managed, so no machineManagers (nil, not empty)", inputs(func(in *machineConfigurationInputs) {
			in.Gates = fg.New(fixtures.ReleaseVersion, nil, []configv1.FeatureGateName{fg.ManagedBootImagesAWS})
		}), []func(*testing.T, machineConfigurationStatus){
			selectionIs(), func(t *testing.T, got machineConfigurationStatus) {
				if got.Want.Status.ManagedBootImagesStatus.MachineManagers != nil {
					t.Error("machineManagers is an empty list: apply cannot send one")
				}
			},
		}},
		{"bare metal: no machineManagers (nil), and unsupported", inputs(onPlatform(configv1.BareMetalPlatformType)), []func(*testing.T, machineConfigurationStatus){
			selectionIs(), supported(metav1.ConditionFalse, bootimage.ReasonUnsupportedPlatform),
			func(t *testing.T, got machineConfigurationStatus) {
				if got.Want.Status.ManagedBootImagesStatus.MachineManagers != nil {
					t.Error("machineManagers is an empty list: apply cannot send one")
				}
			},
		}},
		{"a Machine API CRD missing: unsupported, naming it", inputs(func(in *machineConfigurationInputs) {
			in.MachineAPIMissing = "MachineSet (machinesets.machine.openshift.io)"
		}), []func(*testing.T, machineConfigurationStatus){
			supported(metav1.ConditionFalse, status.ReasonMachineAPIMissing),
		}},
		{"the spec's selection, its generation observed, conditions stamped now", inputs(func(in *machineConfigurationInputs) {
			in.MC.Spec.ManagedBootImages.MachineManagers = []operatorv1.MachineManager{machineSets(operatorv1.None)}
		}), []func(*testing.T, machineConfigurationStatus){
			selectionIs(machineSets(operatorv1.None)),
			func(t *testing.T, got machineConfigurationStatus) {
				if got.Want.Status.ObservedGeneration != 2 {
					t.Errorf("observedGeneration %d, want 2", got.Want.Status.ObservedGeneration)
				}
				for _, c := range got.Want.Status.Conditions {
					if !c.LastTransitionTime.Equal(&now) || c.ObservedGeneration != 2 {
						t.Errorf("condition %s: lastTransitionTime %v, observedGeneration %d", c.Type, c.LastTransitionTime, c.ObservedGeneration)
					}
				}
				if c := condition(t, got, status.ConditionConfigurationDegraded); c.Status != metav1.ConditionFalse {
					t.Errorf("ConfigurationDegraded %s: %s", c.Status, c.Message)
				}
			},
		}},
		{"Degraded kept while its objects are undecided on the new inputs", inputs(func(in *machineConfigurationInputs) {
			degradedWas(in)
			in.Progress = status.Progress{MachineSets: status.Tally{Total: 1}}
		}), []func(*testing.T, machineConfigurationStatus){
			func(t *testing.T, got machineConfigurationStatus) {
				c := condition(t, got, status.ConditionBootImageUpdateDegraded)
				if c.Status != metav1.ConditionTrue || c.Message != "MachineSet a: cloud lookup failed" || !c.LastTransitionTime.Equal(&earlier) || c.ObservedGeneration != 2 {
					t.Errorf("Degraded not kept: %+v", c)
				}
				if c := condition(t, got, status.ConditionBootImageUpdateProgressing); c.Status != metav1.ConditionTrue {
					t.Errorf("Progressing %s, want True while undecided", c.Status)
				}
			},
		}},
		{"Degraded cleared once its objects are decided", inputs(degradedWas), []func(*testing.T, machineConfigurationStatus){
			func(t *testing.T, got machineConfigurationStatus) {
				if c := condition(t, got, status.ConditionBootImageUpdateDegraded); c.Status != metav1.ConditionFalse || !c.LastTransitionTime.Equal(&now) {
					t.Errorf("Degraded %+v, want False since now", c)
				}
			},
		}},
		{"no ClusterVersion: Degraded, and a warning", inputs(func(in *machineConfigurationInputs) { in.ClusterVersion = nil }), []func(*testing.T, machineConfigurationStatus){
			func(t *testing.T, got machineConfigurationStatus) {
				if c := condition(t, got, status.ConditionBootImageUpdateDegraded); c.Status != metav1.ConditionTrue {
					t.Errorf("Degraded %s, want True", c.Status)
				}
				if len(got.Warnings) != 1 || got.Warnings[0].reason != ReasonClusterVersionMissing {
					t.Errorf("warnings %+v", got.Warnings)
				}
			},
		}},
		{"a missing stream holding nothing back is not said", inputs(func(in *machineConfigurationInputs) {
			in.BootImages, in.StreamProblem = nil, warning{bootimage.ReasonStreamMissing, bootimage.StreamMissingMessage}
		}), []func(*testing.T, machineConfigurationStatus){
			func(t *testing.T, got machineConfigurationStatus) {
				if len(got.Warnings) != 0 {
					t.Errorf("warnings %+v", got.Warnings)
				}
			},
		}},
		{"a stream that does not parse is said, and a spec problem before it", inputs(func(in *machineConfigurationInputs) {
			in.StreamProblem = warning{bootimage.ReasonInvalidStream, "streams: invalid JSON"}
			in.ClusterAPIProblem = "Cluster API is not installed"
			// Partial is refused for the CPMS: None, with a problem.
			in.Gates = gates(false, fg.ManagedBootImagesCPMS)
			in.MC.Spec.ManagedBootImages.MachineManagers = []operatorv1.MachineManager{{Resource: operatorv1.ControlPlaneMachineSets, APIGroup: operatorv1.MachineAPI,
				Selection: operatorv1.MachineManagerSelector{Mode: operatorv1.Partial, Partial: &operatorv1.PartialSelector{MachineResourceSelector: &metav1.LabelSelector{}}}}}
		}), []func(*testing.T, machineConfigurationStatus){
			func(t *testing.T, got machineConfigurationStatus) {
				var reasons []string
				for _, w := range got.Warnings {
					reasons = append(reasons, w.reason)
				}
				want := []string{status.ReasonInvalidSelection, bootimage.ReasonInvalidStream, ReasonClusterAPINotStarted}
				if !equality.Semantic.DeepEqual(reasons, want) {
					t.Errorf("warnings %+v, want reasons %v", got.Warnings, want)
				}
				if c := condition(t, got, status.ConditionConfigurationDegraded); c.Status != metav1.ConditionTrue {
					t.Errorf("ConfigurationDegraded %s", c.Status)
				}
			},
		}},
		{"skew enforcement off: its status left as it was", inputs(func(in *machineConfigurationInputs) {
			in.MC.Status.BootImageSkewEnforcementStatus = operatorv1.BootImageSkewEnforcementStatus{Mode: operatorv1.BootImageSkewEnforcementModeStatusNone}
		}), []func(*testing.T, machineConfigurationStatus){
			func(t *testing.T, got machineConfigurationStatus) {
				if got.SkewOn || got.Want.Status.BootImageSkewEnforcementStatus.Mode != operatorv1.BootImageSkewEnforcementModeStatusNone {
					t.Errorf("skew on %v, status %+v", got.SkewOn, got.Want.Status.BootImageSkewEnforcementStatus)
				}
			},
		}},
		{"skew enforcement on: Automatic, with MachineSets All", inputs(func(in *machineConfigurationInputs) { in.Gates = gates(true) }), []func(*testing.T, machineConfigurationStatus){
			func(t *testing.T, got machineConfigurationStatus) {
				if s := got.Want.Status.BootImageSkewEnforcementStatus; !got.SkewOn || s.Mode != operatorv1.BootImageSkewEnforcementModeStatusAutomatic {
					t.Errorf("skew on %v, status %+v", got.SkewOn, s)
				}
			},
		}},
		{"skew enforcement on, MachineSets not all selected: Manual at the install version", inputs(func(in *machineConfigurationInputs) {
			in.Gates = gates(true)
			in.MC.Spec.ManagedBootImages.MachineManagers = []operatorv1.MachineManager{machineSets(operatorv1.None)}
		}), []func(*testing.T, machineConfigurationStatus){
			func(t *testing.T, got machineConfigurationStatus) {
				if s := got.Want.Status.BootImageSkewEnforcementStatus; s.Mode != operatorv1.BootImageSkewEnforcementModeStatusManual || s.Manual.OCPVersion == "" {
					t.Errorf("skew status %+v", s)
				}
			},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			read := c.in.MC.DeepCopy()
			got := composeMachineConfigurationStatus(c.in)
			if !equality.Semantic.DeepEqual(c.in.MC, read) {
				t.Error("the MachineConfiguration read was changed")
			}
			for _, check := range c.checks {
				check(t, got)
			}
		})
	}
}
