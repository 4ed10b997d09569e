package bootimage

import (
	"fmt"
	"time"
)

// Action is what the operator does with one MachineSet or ControlPlaneMachineSet.
type Action string

// Actions.
const (
	Update   Action = "Update"
	NoChange Action = "NoChange"
	Skip     Action = "Skip"
	Error    Action = "Error"
)

// CloudLookupFailed returns the Error decision for obj when the cloud lookup its decision needs
// fails with err.
func CloudLookupFailed(d Decision, err error) Decision {
	d.ProviderSpecPatch, d.UserData = nil, nil
	return d.With(Error, ReasonCloudLookupFailed, "cloud lookup failed: %v", err)
}

// StreamMissingMessage says that the stream ConfigMap is missing.
const StreamMissingMessage = "ConfigMap openshift-machine-config-operator/coreos-bootimages not found: no boot images to compare against"

// clusterLevel are errors of the cluster's inputs, not of the object: every object has the same one.
var clusterLevel = map[string]bool{ReasonStreamMissing: true, ReasonInvalidStream: true}

// ClusterLevel reports whether d is an Error of the cluster's inputs (the stream ConfigMap) shared
// by every object, which is reported once for the cluster rather than once per object.
func (d Decision) ClusterLevel() bool {
	return d.Action == Error && clusterLevel[d.Reason]
}

// CloudErrorGrace is how long a stream target may stay unavailable in the cloud (and a cloud
// lookup keep failing) before the object is an Error: the operator and bootimagectl plan share it.
const CloudErrorGrace = 3 * time.Minute

// TargetUnavailableTooLong returns the Error a TargetImageUnavailable skip becomes once it has
// lasted for longer than grace: new machines keep booting the current image meanwhile, which an
// admin must hear of.
func TargetUnavailableTooLong(d Decision, grace time.Duration) Decision {
	return d.With(Error, ReasonTargetImageUnavailable, "%s for more than %s: new machines keep booting %s until it is published there or the stream changes", d.Message, grace, d.Current)
}

// cloudDependentSkips are skips that a cloud can lift without any change in the cluster: an image
// not yet available or replicated to the region.
var cloudDependentSkips = map[string]bool{ReasonTargetImageUnavailable: true, ReasonRegionNotInStream: true, ReasonCopyNotPermitted: true}

// CloudDependent reports whether d may change without any change in the cluster, so it is worth
// re-checking on a timer.
func (d Decision) CloudDependent() bool {
	return d.Action == Skip && cloudDependentSkips[d.Reason]
}

// warningSkips are skips an admin must act on now (a right, a quota, a credentials Secret), said as
// Warning Events rather than Normal ones.
var warningSkips = map[string]bool{ReasonCopyNotPermitted: true}

// Warns reports whether d is a skip said as a warning.
func (d Decision) Warns() bool {
	return d.Action == Skip && warningSkips[d.Reason]
}

// needsAdminSkips are skips of selected objects that the operator cannot resolve by itself: what
// the MCO counts as reconcileSkipped. While one exists, skew enforcement cannot claim the cluster's
// boot images are current.
var needsAdminSkips = map[string]bool{
	ReasonOwnedByController: true, ReasonArchitectureUnknown: true, ReasonCustomImage: true, ReasonImageNotByID: true,
	ReasonRegionNotInStream: true, ReasonTargetImageUnavailable: true, ReasonArchitectureNotInStream: true,
	ReasonConfidentialVM: true, ReasonUnsupportedArchitecture: true, ReasonManagedByTopology: true, ReasonUnsupportedTemplate: true,
	ReasonOSStreamNotInBootImages: true, ReasonOSStreamTemplateTaken: true, ReasonDeniedByPolicy: true, ReasonCopyNotPermitted: true,
	ReasonBootImageHeld: true,
}

// LeftBehind reports whether d leaves a selected object on an image the operator could not update
// by itself (a custom or unknown image and the like), as opposed to not selected, intentionally
// excluded (Windows, another OS stream) or up to date.
func (d Decision) LeftBehind() bool {
	return d.Action == Skip && needsAdminSkips[d.Reason]
}

// Decision is what to do with one object, and why.
type Decision struct {
	Kind string `json:"kind"`
	// APIGroup is ClusterAPIGroup for Cluster API objects, "" for the Machine API's.
	APIGroup  string `json:"apiGroup,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Platform  string `json:"platform"`
	Arch      string `json:"arch"`
	// Stream is the OS stream the boot image comes from (OSStreamChoice); StreamNote, when
	// set, says that the object's labels or pool disagree with it.
	Stream     string `json:"stream,omitempty"`
	StreamNote string `json:"streamNote,omitempty"`
	Action     Action `json:"action"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
	// Current and Target are the boot image in a readable form: an AMI id, a GCP image path,
	// Azure publisher:offer:sku:version, a vSphere template.
	Current string `json:"current"`
	Target  string `json:"target"`
	// BootImageVersion is the RHCOS release of Target when it is known, for skew enforcement:
	// the stream's AWS release for RHCOS AMIs, the release in the description of a marketplace AMI.
	BootImageVersion string `json:"-"`
	// Marketplace is true when Target was chosen among a marketplace product's AMIs, whose release
	// may lag the stream's: skew enforcement then records BootImageVersion, as the MCO does.
	Marketplace bool `json:"-"`

	// ProviderSpecPatch sets only the image field(s) of providerSpec.value; set on Update.
	ProviderSpecPatch []PatchOp `json:"-"`
	// UserData is the upgraded user-data stub to write before the patch; nil when it is current.
	UserData []byte `json:"-"`
	// UserDataVersion is the Ignition version UserData was upgraded from.
	UserDataVersion string `json:"-"`
	// Prepare, on an Update, is what the platform must do in its cloud before the patch, of the
	// type its folder names (a *vsphere.Import, an *aws.Copy); nil when nothing is.
	Prepare any `json:"-"`
	// Rolls, on a MachineDeployment, is how many Machines an update replaces (Object.Machines).
	Rolls *int `json:"rolls,omitempty"`
	// Verification is the state of the object's newest recorded change (verify.go): Pending,
	// Verified or Failed; "" when nothing was recorded or verification is off.
	Verification string `json:"verification,omitempty"`
}

// Outdated reports whether d leaves a selected object on an image other than its target for a
// reason that lasts: left behind, an Error of the object, held after a restore, or waiting for a
// canary. Not selected, excluded and up-to-date objects are not outdated.
func (d Decision) Outdated() bool {
	switch {
	case d.Action == Error:
		return !d.ClusterLevel()
	case d.Action == Skip:
		return d.LeftBehind() || d.Reason == ReasonWaitingForCanary
	}
	return false
}

// StreamWarning says, of an object whose labels or pool disagree with its OS stream (StreamNote),
// what its machines boot: the stream's image, or, for a stream coreos-bootimages lacks, their own.
func (d Decision) StreamWarning() string {
	if d.Reason == ReasonOSStreamNotInBootImages {
		return fmt.Sprintf("names OS stream %s, which coreos-bootimages does not carry, so it keeps its boot image; %s", d.Stream, d.StreamNote)
	}
	return fmt.Sprintf("boots OS stream %s, but %s", d.Stream, d.StreamNote)
}

// With returns d with its action, reason and message set.
func (d Decision) With(action Action, reason, format string, args ...any) Decision {
	d.Action, d.Reason, d.Message = action, reason, fmt.Sprintf(format, args...)
	return d
}

// Summary counts decisions by action.
type Summary struct {
	Update   int `json:"update"`
	NoChange int `json:"noChange"`
	Skip     int `json:"skip"`
	Error    int `json:"error"`
}

// Add counts d.
func (s *Summary) Add(d Decision) {
	switch d.Action {
	case Update:
		s.Update++
	case NoChange:
		s.NoChange++
	case Skip:
		s.Skip++
	case Error:
		s.Error++
	}
}
