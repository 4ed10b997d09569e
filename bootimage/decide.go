package bootimage

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/coreos/stream-metadata-go/stream"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// HotLoopLimit is how many patches of one object to one target are made before the operator
// concludes that something reverts them.
const HotLoopLimit = 3

// Decide computes what to do with obj. The checks run in a fixed order and the first that applies
// decides, so the operator and `bootimagectl plan` give the same answer for the same inputs.
// An error is transient (a cloud API call failed): try again later.
func Decide(ctx context.Context, cluster Cluster, obj Object) (Decision, error) {
	d := Decision{Kind: obj.Kind, APIGroup: string(obj.APIGroup), Namespace: obj.Namespace, Name: obj.Name, Platform: string(cluster.Platform)}
	if obj.Kind == KindMachineDeployment {
		d.Rolls = &obj.Machines
	}
	choice := cluster.OSStream(obj)
	d.Stream = choice.Name
	if skip, ok := preconditions(cluster, obj); ok {
		return d.With(skip.Action, skip.Reason, "%s", skip.Message), nil
	}
	// The note waits for the preconditions: an object left alone for another reason boots nothing new.
	d.StreamNote = choice.Note
	if cluster.BootImages == nil {
		return d.With(Error, ReasonStreamMissing, "%s", StreamMissingMessage), nil
	}
	parse := ParseBootImages
	if cluster.ParseStreams != nil {
		parse = cluster.ParseStreams
	}
	streams, err := parse(cluster.BootImages)
	if err != nil {
		return d.With(Error, ReasonInvalidStream, "%v", err), nil
	}
	if obj.Problem != "" {
		return d.With(Error, ReasonInvalidTemplate, "%s", obj.Problem), nil
	}
	spec, err := parseProviderSpec(obj.ProviderSpec)
	if err != nil {
		return d.With(Error, ReasonInvalidProviderSpec, "providerSpec: %v", err), nil
	}
	st, decided, ok := osStream(d, streams, choice)
	if !ok {
		if decided.Reason == ReasonOSStreamNotInBootImages {
			// It keeps its image: nothing is booted and then rebased.
			decided.StreamNote = choice.unserved
		}
		return decided, nil
	}
	arch, decided, ok := architecture(d, cluster, obj, st, choice.Name)
	if !ok {
		return decided, nil
	}
	d.Arch = arch
	rpm, _ := kubeToRPMArch(arch)
	d, err = platforms[cluster.Platform].Decide(ctx, d, PlatformInput{Spec: MachineSpec{TemplateKind: obj.TemplateKind, fields: spec}, Arch: rpm, Stream: st, OSStream: choice.Name, Cluster: cluster})
	if err != nil || d.Action != Update {
		return d, err
	}
	d = updateChecks(d, obj, obj.selectionKey(cluster.Effective))
	d = awaitCanary(held(d, obj), obj, cluster.Canaries)
	if d.Action == Update && obj.RollingOut {
		d.ProviderSpecPatch = nil
		return d.With(Skip, ReasonMachineDeploymentRollingOut, "MachineDeployment %s is still rolling out (status.observedGeneration behind metadata.generation, or condition RollingOut True): its boot image is updated once the rollout ends, not in the middle of it", obj.Name), nil
	}
	if d.Action == Update && d.Rolls != nil {
		d.Message += fmt.Sprintf("; rolls %d machines: a MachineDeployment replaces every Machine it owns when its template changes", *d.Rolls)
	}
	return d, nil
}

// preconditions applies the checks that need neither the stream nor the providerSpec.
func preconditions(cluster Cluster, obj Object) (Decision, bool) {
	skip := func(reason, format string, args ...any) (Decision, bool) {
		return Decision{}.With(Skip, reason, format, args...), true
	}
	p, managed := platforms[cluster.Platform]
	capi := obj.APIGroup == ClusterAPIGroup
	if !managed || (obj.Resource == operatorv1.ControlPlaneMachineSets && !p.Traits().ControlPlane) || (capi && p.Traits().TemplateKind == "") {
		return skip(ReasonUnsupportedPlatform, "%s", UnsupportedMessage(string(obj.Resource), cluster.Platform))
	}
	if cluster.Gates == nil {
		return skip(ReasonFeatureGateDisabled, "feature gates unknown: %v", cluster.GatesError)
	}
	if obj.Resource == operatorv1.ControlPlaneMachineSets && !cluster.Gates.Enabled(featuregates.ManagedBootImagesCPMS) {
		return skip(ReasonFeatureGateDisabled, "feature gate %s is off", featuregates.ManagedBootImagesCPMS)
	}
	if capi && !cluster.Gates.Enabled(featuregates.ManagedBootImagesAWSCAPI) {
		return skip(ReasonFeatureGateDisabled, "feature gate %s is off", featuregates.ManagedBootImagesAWSCAPI)
	}
	if gate := p.Traits().MachineSetGate; gate != "" && !cluster.Gates.Enabled(gate) {
		return skip(ReasonFeatureGateDisabled, "feature gate %s is off", gate)
	}
	group := cmp.Or(obj.APIGroup, operatorv1.MachineAPI)
	selected, err := selectedIn(cluster.Effective, group, obj.Resource, obj.Labels)
	if err != nil {
		return skip(ReasonNotSelected, "%v", err)
	}
	if !selected {
		return skip(ReasonNotSelected, "not selected by MachineConfiguration/cluster status.managedBootImagesStatus for %s: %s", qualified(group, obj.Resource), whyNotSelected(cluster.Effective, group, obj.Resource))
	}
	if d, ok := authority(obj); ok {
		return d, true
	}
	if !cluster.Stable {
		return skip(ReasonClusterNotStable, "the cluster is updating (ClusterVersion history[0] is not Completed); boot images follow once it completes")
	}
	if capi {
		if d, ok := clusterAPIOwner(obj); ok {
			return d, true
		}
	} else if len(obj.OwnerReferences) > 0 {
		o := obj.OwnerReferences[0]
		return skip(ReasonOwnedByController, "owned by %s %s, which manages its boot image", o.Kind, o.Name)
	}
	if strings.EqualFold(obj.TemplateLabels[WindowsLabel], "Windows") {
		return skip(ReasonWindowsMachineSet, "Windows machines (%s=Windows) do not boot RHCOS", WindowsLabel)
	}
	if want := p.Traits().TemplateKind; capi && obj.TemplateKind != "" && obj.TemplateKind != want {
		return skip(ReasonUnsupportedTemplate, "infrastructure template kind %s is not managed on %s (only %s)", obj.TemplateKind, cluster.Platform, want)
	}
	return Decision{}, false
}

// authority leaves alone the objects whose other API is in charge: a Machine API MachineSet that
// Cluster API is authoritative for, a Cluster API MachineSet whose Machine API twin is, and both
// while they migrate. cluster-capi-operator's admission policies refuse such writes, or, while
// migrating, nothing stops them racing the migration.
func authority(obj Object) (Decision, bool) {
	skip := func(reason, format string, args ...any) (Decision, bool) {
		return Decision{}.With(Skip, reason, format, args...), true
	}
	switch {
	case obj.APIGroup == ClusterAPIGroup && obj.Kind == KindMachineSet && obj.Twin != nil:
		switch *obj.Twin {
		case machinev1beta1.MachineAuthorityClusterAPI:
			return Decision{}, false
		case machinev1beta1.MachineAuthorityMigrating:
			return skip(ReasonMigrating, "MachineSet %s/%s is migrating between the Machine API and Cluster API (status.authoritativeAPI Migrating); its boot image is updated once the migration ends", MachineAPINamespace, obj.Name)
		}
		return skip(ReasonAuthorityMachineAPI, "the Machine API MachineSet %s/%s is authoritative (status.authoritativeAPI %q): its boot image is updated there and mirrored here", MachineAPINamespace, obj.Name, *obj.Twin)
	case obj.APIGroup == "" && obj.Kind == KindMachineSet:
		switch obj.Authority {
		case machinev1beta1.MachineAuthorityClusterAPI:
			return skip(ReasonAuthorityClusterAPI, "status.authoritativeAPI is ClusterAPI: the Cluster API MachineSet %s/%s is in charge and its boot image is updated there", ClusterAPINamespace, obj.Name)
		case machinev1beta1.MachineAuthorityMigrating:
			return skip(ReasonMigrating, "status.authoritativeAPI is Migrating: neither the Machine API nor the Cluster API MachineSet is written until the migration ends")
		}
	}
	return Decision{}, false
}

// clusterAPIOwner leaves alone Cluster API objects whose template another controller writes: a
// MachineSet of a MachineDeployment, an object of a ClusterClass topology, or one with another
// controller. The non-controller owner reference every OpenShift Cluster API object has to its
// Cluster is normal.
func clusterAPIOwner(obj Object) (Decision, bool) {
	if ref := metav1.GetControllerOfNoCopy(&metav1.ObjectMeta{OwnerReferences: obj.OwnerReferences}); ref != nil {
		if ref.Kind == KindMachineDeployment {
			return Decision{}.With(Skip, ReasonOwnedByMachineDeployment, "owned by MachineDeployment %s, whose boot image is decided instead", ref.Name), true
		}
		return Decision{}.With(Skip, ReasonOwnedByController, "owned by %s %s, which manages its boot image", ref.Kind, ref.Name), true
	}
	if _, ok := obj.Labels[TopologyOwnedLabel]; ok {
		return Decision{}.With(Skip, ReasonManagedByTopology, "label %s: a ClusterClass topology writes its templates", TopologyOwnedLabel), true
	}
	return Decision{}, false
}

func qualified(group operatorv1.MachineManagerMachineSetsAPIGroupType, resource operatorv1.MachineManagerMachineSetsResourceType) string {
	if group == operatorv1.MachineAPI {
		return string(resource)
	}
	return string(resource) + "." + string(group)
}

// osStream returns the CoreOS stream of choice, or the decision when coreos-bootimages has none
// of that name: a labelled object never takes another stream's images, nor does an unlabelled one.
func osStream(d Decision, streams *Streams, choice OSStreamChoice) (*stream.Stream, Decision, bool) {
	if st, ok := streams.ByName[choice.Name]; ok {
		return st, d, true
	}
	if err, ok := streams.Invalid[choice.Name]; ok {
		return nil, d.With(Error, ReasonInvalidStream, "%v", err), false
	}
	if !streams.Keyed {
		return nil, d.With(Skip, ReasonOSStreamNotInBootImages, "%s names OS stream %s, but coreos-bootimages has no streams key (a payload before OpenShift 5.0): its stream key holds %s boot images only",
			choice.From, choice.Name, LegacyOSStream), false
	}
	return nil, d.With(Skip, ReasonOSStreamNotInBootImages, "%s names OS stream %s, which coreos-bootimages key streams does not carry (it has %s)",
		choice.From, choice.Name, strings.Join(streams.Names(), ", ")), false
}

// architecture returns the Kubernetes architecture of obj's machines, or a decision when it is
// unknown, invalid, or has no boot images.
func architecture(d Decision, cluster Cluster, obj Object, st *stream.Stream, osStream string) (string, Decision, bool) {
	arch := ""
	if obj.Resource == operatorv1.ControlPlaneMachineSets {
		arch = cluster.ControlPlaneArch
	} else {
		a, err := archFromAnnotation(obj.Annotations)
		if err != nil {
			return "", d.With(Error, ReasonInvalidArchitecture, "%v", err), false
		}
		arch = a
		if arch == "" && cluster.MultiArch {
			// The Machine API path skips, as it did; for Cluster API objects, the MCO draft's error.
			action := Skip
			if obj.APIGroup == ClusterAPIGroup {
				action = Error
			}
			return "", d.With(action, ReasonArchitectureUnknown, "multi-architecture cluster and no kubernetes.io/arch in annotation %s", ArchAnnotation), false
		}
		if arch == "" {
			arch = cluster.ControlPlaneArch
		}
	}
	rpm, ok := kubeToRPMArch(arch)
	if !ok {
		return "", d.With(Skip, ReasonArchitectureUnknown, "architecture %q unknown", arch), false
	}
	d.Arch = arch
	if arches := platforms[cluster.Platform].Traits().Arches; arches != nil && !slices.Contains(arches, rpm) {
		return "", d.With(Skip, ReasonUnsupportedArchitecture, "%s has no %s boot images", cluster.Platform, arch), false
	}
	if _, ok := st.Architectures[rpm]; !ok {
		return "", d.With(Skip, ReasonArchitectureNotInStream, "the %s stream has no %s boot images (it has %s)", osStream, rpm, strings.Join(slices.Sorted(maps.Keys(st.Architectures)), ", ")), false
	}
	return arch, d, true
}

// updateChecks runs the checks that matter only when an update is due: the user-data stub and
// the hot-loop guard.
func updateChecks(update Decision, obj Object, selection string) Decision {
	refuse := update
	refuse.ProviderSpecPatch, refuse.UserData, refuse.Prepare = nil, nil, nil
	d := update
	if obj.UserData != nil {
		upgraded, from, err := UpgradeUserData(obj.UserData)
		if err != nil {
			return refuse.With(Error, ReasonInvalidUserData, "%v", err)
		}
		d.UserData, d.UserDataVersion = upgraded, from
	}
	if obj.Attempts(d.Target, selection) >= HotLoopLimit {
		return refuse.With(Error, ReasonHotLoopDetected, "refusing to reconcile %s %s, hot loop detected. Please opt-out of boot image updates, adjust your machine provisioning workflow to prevent hot loops and opt back in to resume boot image updates",
			strings.ToLower(obj.Kind), obj.Name)
	}
	return d
}
