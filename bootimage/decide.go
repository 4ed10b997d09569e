package bootimage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// WindowsLabel on a MachineSet's machine template marks Windows workers, whose images are not RHCOS.
const WindowsLabel = "machine.openshift.io/os-id"

// Cluster is the cluster-wide input of a decision.
type Cluster struct {
	Platform           configv1.PlatformType
	InfrastructureName string
	// Gates is nil while the gates are unknown; GatesError says why.
	Gates      Gates
	GatesError error
	Effective  operatorv1.ManagedBootImages
	// Stable is true while the newest ClusterVersion history entry is Completed.
	Stable    bool
	MultiArch bool
	// ControlPlaneArch is the control plane's Kubernetes architecture.
	ControlPlaneArch string
	// BootImages is the coreos-bootimages ConfigMap; nil when missing.
	BootImages *corev1.ConfigMap
	// Streams, when set, parses BootImages (a StreamCache shared across decisions).
	Streams *StreamCache
	// Images looks cloud images up; nil when no catalogue is available.
	Images Catalog
	// VSphere is Infrastructure spec.platformSpec.vsphere: vCenters and failure domains.
	VSphere *configv1.VSpherePlatformSpec
	// Templates reads vCenter templates; nil when vCenter is not consulted (offline plans).
	Templates VSphereTemplates
}

// Object is a MachineSet or ControlPlaneMachineSet, reduced to what decisions read.
type Object struct {
	Kind, Namespace, Name string
	Resource              operatorv1.MachineManagerMachineSetsResourceType
	Labels, Annotations   map[string]string
	TemplateLabels        map[string]string
	OwnerReferences       []metav1.OwnerReference
	// ProviderSpec is the raw providerSpec.value; nil when missing.
	ProviderSpec []byte
	// UserData is the user-data Secret's stub; nil when it was not looked up.
	UserData *UserData
	// Memory is what the operator remembers of the object (hot loops, cloud failures).
	Memory Memory
	// Problem, when set, is an Error InvalidTemplate: the object has no usable template.
	Problem string
}

// UserData is the content of a user-data Secret, as found.
type UserData struct {
	SecretName string
	Found      bool
	Data       []byte
	// ResourceVersion is the Secret's as read: an upgraded stub is written only over that read.
	ResourceVersion string
}

// Kinds of the objects decided on.
const (
	KindMachineSet             = "MachineSet"
	KindControlPlaneMachineSet = "ControlPlaneMachineSet"
)

// MachineSetObject reduces a MachineSet.
func MachineSetObject(ms *machinev1beta1.MachineSet) Object {
	o := Object{
		Kind: KindMachineSet, Namespace: ms.Namespace, Name: ms.Name, Resource: operatorv1.MachineSets,
		Labels: ms.Labels, Annotations: ms.Annotations, TemplateLabels: ms.Spec.Template.Labels,
		OwnerReferences: ms.OwnerReferences,
	}
	if v := ms.Spec.Template.Spec.ProviderSpec.Value; v != nil {
		o.ProviderSpec = v.Raw
	}
	return o
}

// ControlPlaneMachineSetObject reduces a ControlPlaneMachineSet.
func ControlPlaneMachineSetObject(cpms *machinev1.ControlPlaneMachineSet) Object {
	o := Object{
		Kind: KindControlPlaneMachineSet, Namespace: cpms.Namespace, Name: cpms.Name, Resource: operatorv1.ControlPlaneMachineSets,
		Labels: cpms.Labels, Annotations: cpms.Annotations, OwnerReferences: cpms.OwnerReferences,
	}
	switch t := cpms.Spec.Template; {
	case t.MachineType != machinev1.OpenShiftMachineV1Beta1MachineType:
		o.Problem = fmt.Sprintf("spec.template.machineType is %q; only %s templates have a boot image to manage", t.MachineType, machinev1.OpenShiftMachineV1Beta1MachineType)
	case t.OpenShiftMachineV1Beta1Machine == nil:
		o.Problem = "spec.template.machines_v1beta1_machine_openshift_io is missing"
	default:
		o.TemplateLabels = t.OpenShiftMachineV1Beta1Machine.ObjectMeta.Labels
		if v := t.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value; v != nil {
			o.ProviderSpec = v.Raw
		}
	}
	return o
}

// HotLoopLimit is how many patches of one object to one target are made before the operator
// concludes that something reverts them.
const HotLoopLimit = 3

// provider decides the image of one platform.
type provider interface {
	// decide reads the current image from ps and computes the target, returning d with its
	// action, current, target and patch set. err is a transient failure (a cloud API call).
	decide(ctx context.Context, d Decision, in providerInput) (Decision, error)
}

type providerInput struct {
	spec     rawObject
	arch     string // RPM name
	streams  *Streams
	images   Catalog
	infraNam string
	// vsphere and templates are the cluster's vSphere failure domains and templates.
	vsphere   *configv1.VSpherePlatformSpec
	templates VSphereTemplates
}

var providers = map[configv1.PlatformType]provider{
	configv1.AWSPlatformType:     aws{},
	configv1.GCPPlatformType:     gcp{},
	configv1.AzurePlatformType:   azure{},
	configv1.VSpherePlatformType: vsphere{},
}

// Decide computes what to do with obj. The checks run in a fixed order and the first that applies
// decides, so the operator and `bootimagectl plan` give the same answer for the same inputs.
// An error is transient (a cloud API call failed): try again later.
func Decide(ctx context.Context, cluster Cluster, obj Object) (Decision, error) {
	d := Decision{Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, Platform: string(cluster.Platform)}
	if skip, ok := preconditions(cluster, obj); ok {
		return d.with(skip.Action, skip.Reason, "%s", skip.Message), nil
	}
	if cluster.BootImages == nil {
		return d.with(Error, ReasonStreamMissing, "%s", StreamMissingMessage), nil
	}
	parse := ParseBootImages
	if cluster.Streams != nil {
		parse = cluster.Streams.Parse
	}
	streams, err := parse(cluster.BootImages)
	if err != nil {
		return d.with(Error, ReasonInvalidStream, "%v", err), nil
	}
	if obj.Problem != "" {
		return d.with(Error, ReasonInvalidTemplate, "%s", obj.Problem), nil
	}
	spec, err := parseProviderSpec(obj.ProviderSpec)
	if err != nil {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: %v", err), nil
	}
	arch, decided, ok := architecture(d, cluster, obj, streams)
	if !ok {
		return decided, nil
	}
	d.Arch = arch
	rpm, _ := RPMArch(arch)
	d, err = providers[cluster.Platform].decide(ctx, d, providerInput{spec: spec, arch: rpm, streams: streams, images: cluster.Images, infraNam: cluster.InfrastructureName,
		vsphere: cluster.VSphere, templates: cluster.Templates})
	if err != nil || d.Action != Update {
		return d, err
	}
	return updateChecks(d, obj, SelectionKey(cluster.Effective, obj.Resource)), nil
}

// preconditions applies the checks that need neither the stream nor the providerSpec.
func preconditions(cluster Cluster, obj Object) (Decision, bool) {
	skip := func(reason, format string, args ...any) (Decision, bool) {
		return Decision{}.with(Skip, reason, format, args...), true
	}
	p, managed := providers[cluster.Platform]
	if !managed || p == nil || (obj.Resource == operatorv1.ControlPlaneMachineSets && !slices.Contains(cpmsPlatforms, cluster.Platform)) {
		return skip(ReasonUnsupportedPlatform, "%s", UnsupportedMessage(string(obj.Resource), cluster.Platform))
	}
	if cluster.Gates == nil {
		return skip(ReasonFeatureGateDisabled, "feature gates unknown: %v", cluster.GatesError)
	}
	if obj.Resource == operatorv1.ControlPlaneMachineSets && !cluster.Gates.Enabled(featuregates.ManagedBootImagesCPMS) {
		return skip(ReasonFeatureGateDisabled, "feature gate %s is off", featuregates.ManagedBootImagesCPMS)
	}
	if gate := machineSetGates[cluster.Platform]; !cluster.Gates.Enabled(gate) {
		return skip(ReasonFeatureGateDisabled, "feature gate %s is off", gate)
	}
	selected, err := Selected(cluster.Effective, obj.Resource, obj.Labels)
	if err != nil {
		return skip(ReasonNotSelected, "%v", err)
	}
	if !selected {
		return skip(ReasonNotSelected, "not selected by MachineConfiguration/cluster status.managedBootImagesStatus for %s", obj.Resource)
	}
	if !cluster.Stable {
		return skip(ReasonClusterNotStable, "the cluster is updating (ClusterVersion history[0] is not Completed); boot images follow once it completes")
	}
	if len(obj.OwnerReferences) > 0 {
		o := obj.OwnerReferences[0]
		return skip(ReasonOwnedByController, "owned by %s %s, which manages its boot image", o.Kind, o.Name)
	}
	if strings.EqualFold(obj.TemplateLabels[WindowsLabel], "Windows") {
		return skip(ReasonWindowsMachineSet, "Windows machines (%s=Windows) do not boot RHCOS", WindowsLabel)
	}
	if s, ok := obj.Labels[OSStreamLabel]; ok && s != DefaultOSStream {
		return skip(ReasonNonDefaultOSStream, "label %s=%s names an OS stream other than the default %s", OSStreamLabel, s, DefaultOSStream)
	}
	return Decision{}, false
}

// architecture returns the Kubernetes architecture of obj's machines, or a decision when it is
// unknown, invalid, or has no boot images.
func architecture(d Decision, cluster Cluster, obj Object, streams *Streams) (string, Decision, bool) {
	arch := ""
	if obj.Resource == operatorv1.ControlPlaneMachineSets {
		arch = cluster.ControlPlaneArch
	} else {
		a, err := archFromAnnotation(obj.Annotations)
		if err != nil {
			return "", d.with(Error, ReasonInvalidArchitecture, "%v", err), false
		}
		arch = a
		if arch == "" && cluster.MultiArch {
			return "", d.with(Skip, ReasonArchitectureUnknown, "multi-architecture cluster and no kubernetes.io/arch in annotation %s", ArchAnnotation), false
		}
		if arch == "" {
			arch = cluster.ControlPlaneArch
		}
	}
	rpm, ok := RPMArch(arch)
	if !ok {
		return "", d.with(Skip, ReasonArchitectureUnknown, "architecture %q unknown", arch), false
	}
	d.Arch = arch
	if cluster.Platform == configv1.AzurePlatformType && (rpm == "ppc64le" || rpm == "s390x") {
		return "", d.with(Skip, ReasonUnsupportedArchitecture, "Azure has no %s boot images", arch), false
	}
	if _, ok := streams.Default.Architectures[rpm]; !ok {
		return "", d.with(Skip, ReasonArchitectureNotInStream, "the %s stream has no %s boot images", DefaultOSStream, rpm), false
	}
	return arch, d, true
}

// updateChecks runs the checks that matter only when an update is due: the user-data stub and
// the hot-loop guard.
func updateChecks(update Decision, obj Object, selection string) Decision {
	refuse := update
	refuse.ProviderSpecPatch, refuse.UserData, refuse.VSphere = nil, nil, nil
	d := update
	if obj.UserData != nil {
		upgraded, from, err := UpgradeUserData(obj.UserData)
		if err != nil {
			return refuse.with(Error, ReasonInvalidUserData, "%v", err)
		}
		d.UserData, d.UserDataVersion = upgraded, from
	}
	if obj.Attempts(d.Target, selection) >= HotLoopLimit {
		return refuse.with(Error, ReasonHotLoopDetected, "refusing to reconcile %s %s, hot loop detected. Please opt-out of boot image updates, adjust your machine provisioning workflow to prevent hot loops and opt back in to resume boot image updates",
			strings.ToLower(obj.Kind), obj.Name)
	}
	return d
}

// rawObject is a JSON object whose values are kept as their raw bytes, so a patch built from it
// carries every field it does not change exactly as read.
type rawObject map[string]json.RawMessage

func parseProviderSpec(raw []byte) (rawObject, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("empty")
	}
	var obj rawObject
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %s", jsonProblem(err))
	}
	if obj == nil {
		return nil, fmt.Errorf("null")
	}
	return obj, nil
}

// field decodes key of o into v; a missing key leaves v alone.
func (o rawObject) field(key string, v any) error {
	raw, ok := o[key]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("field %s: %s", key, jsonProblem(err))
	}
	return nil
}

// PatchOp is one JSON Patch (RFC 6902) operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// set returns the operation that sets path (relative to providerSpec.value) to value, whether or
// not it exists: JSON Patch "add" replaces an existing member.
func set(path string, value any) PatchOp { return PatchOp{Op: "add", Path: path, Value: value} }

// JSONPatch returns the JSON Patch that applies d to an object whose providerSpec.value is at
// prefix, with the resourceVersion the decision was made on: the API server refuses the patch
// with a conflict if the object changed since. Nothing but the image fields is touched.
func (d Decision) JSONPatch(prefix, resourceVersion string, extra ...PatchOp) ([]byte, error) {
	ops := []PatchOp{set("/metadata/resourceVersion", resourceVersion)}
	for _, op := range d.ProviderSpecPatch {
		op.Path = prefix + op.Path
		ops = append(ops, op)
	}
	return json.Marshal(append(ops, extra...))
}
