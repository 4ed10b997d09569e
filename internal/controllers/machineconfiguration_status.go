package controllers

import (
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"slices"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
)

// machineConfigurationInputs are what this operator's part of MachineConfiguration/cluster status
// is composed from, every one read before: nothing here reads the cluster, records or looks at a
// clock.
type machineConfigurationInputs struct {
	// MC is MachineConfiguration/cluster as read, after the migrations.
	MC             *operatorv1.MachineConfiguration
	Infrastructure *configv1.Infrastructure
	Gates          featuregates.Gates
	// Selection is selection(MC, platform, Gates): the configuration in force, with the spec's
	// problems.
	Selection bootimage.Effective
	// MachineAPIMissing names the Machine API CRDs whose controllers wait; "" when none do.
	MachineAPIMissing string
	// ClusterVersion and BootImages (coreos-bootimages) are nil when missing.
	ClusterVersion *configv1.ClusterVersion
	BootImages     *corev1.ConfigMap
	// Progress tallies the current decisions: those taken on the version (inputs.Version) of
	// Selection.
	Progress status.Progress
	// StreamProblem is what is wrong with the stream itself (streamProblem), and
	// ClusterAPIProblem what keeps the Cluster API controllers from running; zero when nothing.
	StreamProblem     warning
	ClusterAPIProblem string
	// Unavailable says which kinds the controllers do without (not served, or not synced), and
	// what that means; empty when none.
	Unavailable []string
	// Now is the lastTransitionTime of a condition that changes status.
	Now metav1.Time
}

// machineConfigurationStatus is the status to write, and what to say about it.
type machineConfigurationStatus struct {
	// Want is MC with the status this operator owns in place.
	Want *operatorv1.MachineConfiguration
	// Warnings are the spec's problems, then the inputs', each to be said once as a Warning Event.
	Warnings []warning
	// SkewOn says gate BootImageSkewEnforcement is on: Want carries the skew enforcement status,
	// and the skew guard is reported.
	SkewOn bool
}

// selection is the boot image configuration in force for mc's spec (its status
// managedBootImagesStatus), with the spec's problems. The progress is counted on its version.
func selection(mc *operatorv1.MachineConfiguration, platform configv1.PlatformType, gates featuregates.Gates) bootimage.Effective {
	eff := bootimage.EffectiveConfiguration(mc.Spec.ManagedBootImages, platform, gates)
	if len(eff.Status.MachineManagers) == 0 {
		// Apply cannot send an empty list; absent is what the API stores for it.
		eff.Status.MachineManagers = nil
	}
	return eff
}

// composeMachineConfigurationStatus composes this operator's part of the status from in: the
// effective configuration, observedGeneration, ConfigurationDegraded, BootImageUpdateSupported,
// Progressing and Degraded (a Degraded kept while its objects are undecided) and, while gate
// BootImageSkewEnforcement is on, the skew enforcement status.
func composeMachineConfigurationStatus(in machineConfigurationInputs) machineConfigurationStatus {
	mc, p := in.MC, in.Progress
	platform := bootimage.PlatformOf(in.Infrastructure)
	want := mc.DeepCopy()
	set := func(c metav1.Condition) {
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = in.Now
		}
		meta.SetStatusCondition(&want.Status.Conditions, c)
	}

	eff := in.Selection
	want.Status.ManagedBootImagesStatus = eff.Status
	want.Status.ObservedGeneration = mc.Generation
	problems := eff.Problems
	if _, err := bootimage.VerificationOf(mc.Annotations); err != nil {
		problems = append(slices.Clone(problems), err.Error()+": boot images are verified with the defaults")
	}
	set(status.ConfigurationCondition(mc.Generation, problems))
	set(status.SupportCondition(mc.Generation, platform, in.Gates, in.MachineAPIMissing))

	var warnings []warning
	// A missing stream is said once, while it holds an object back; one that does not parse is
	// said even with no object to hold back, since nothing else would say it.
	if problem := in.StreamProblem; problem.message != "" && (problem.reason != bootimage.ReasonStreamMissing || p.HeldByCluster(problem.reason)) {
		warnings = append(warnings, problem)
	}
	if in.ClusterAPIProblem != "" {
		warnings = append(warnings, warning{ReasonClusterAPINotStarted, in.ClusterAPIProblem})
	}
	for _, u := range in.Unavailable {
		warnings = append(warnings, warning{ReasonKindNotAvailable, u})
	}
	// A refused AMI copy is a missing right, as a missing RBAC rule is: said once for the cluster.
	if refusal := p.CopyRefusal(); refusal != "" {
		warnings = append(warnings, warning{bootimage.ReasonCopyNotPermitted, refusal})
	}
	if in.ClusterVersion == nil {
		warnings = append(warnings, warning{ReasonClusterVersionMissing, "ClusterVersion/version not found: the operator cannot tell whether the cluster is updating, nor which release it was installed with"})
	}
	progressing, degraded := status.ProgressConditions(mc.Generation, p, messages(warnings))
	set(progressing)
	set(status.KeepDegraded(mc.Status.Conditions, degraded, p))

	skewOn := in.Gates.Enabled(featuregates.BootImageSkewEnforcement)
	if skewOn {
		want.Status.BootImageSkewEnforcementStatus = bootimage.SkewEnforcementStatus(bootimage.SkewInputs{
			Spec:           mc.Spec.BootImageSkewEnforcement,
			Current:        mc.Status.BootImageSkewEnforcementStatus,
			Platform:       platform,
			Topology:       in.Infrastructure.Status.ControlPlaneTopology,
			Effective:      eff.Status,
			Gates:          in.Gates,
			InstallVersion: installVersion(in.ClusterVersion),
			Pass:           p.Pass(releaseVersion(in.BootImages)),
		})
	}
	return machineConfigurationStatus{Want: want, Warnings: append(problemWarnings(problems), warnings...), SkewOn: skewOn}
}
