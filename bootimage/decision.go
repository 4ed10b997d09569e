package bootimage

import "fmt"

// Action is what the operator does with one MachineSet or ControlPlaneMachineSet.
type Action string

// Actions.
const (
	Update   Action = "Update"
	NoChange Action = "NoChange"
	Skip     Action = "Skip"
	Error    Action = "Error"
)

// Reasons: stable words for why a decision was taken, documented in the README.
const (
	ReasonImageOutdated = "ImageOutdated"
	ReasonUpToDate      = "UpToDate"

	ReasonNotSelected             = "NotSelected"
	ReasonFeatureGateDisabled     = "FeatureGateDisabled"
	ReasonClusterNotStable        = "ClusterNotStable"
	ReasonUnsupportedPlatform     = "UnsupportedPlatform"
	ReasonOwnedByController       = "OwnedByController"
	ReasonWindowsMachineSet       = "WindowsMachineSet"
	ReasonNonDefaultOSStream      = "NonDefaultOSStream"
	ReasonArchitectureUnknown     = "ArchitectureUnknown"
	ReasonArchitectureNotInStream = "ArchitectureNotInStream"
	ReasonRegionNotInStream       = "RegionNotInStream"
	ReasonCustomImage             = "CustomImage"
	ReasonImageNotByID            = "ImageNotByID"
	ReasonConfidentialVM          = "ConfidentialVM"
	ReasonUnsupportedArchitecture = "UnsupportedArchitecture"
	ReasonTargetImageUnavailable  = "TargetImageUnavailable"

	ReasonInvalidArchitecture = "InvalidArchitecture"
	ReasonInvalidProviderSpec = "InvalidProviderSpec"
	ReasonInvalidStream       = "InvalidStream"
	ReasonStreamMissing       = "StreamMissing"
	ReasonInvalidUserData     = "InvalidUserData"
	ReasonHotLoopDetected     = "HotLoopDetected"
	ReasonInvalidTemplate     = "InvalidTemplate"
)

// Decision is what to do with one object, and why.
type Decision struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Platform  string `json:"platform"`
	Arch      string `json:"arch"`
	Action    Action `json:"action"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	// Current and Target are the boot image in a readable form: an AMI id, a GCP image path,
	// Azure publisher:offer:sku:version, a vSphere template.
	Current string `json:"current"`
	Target  string `json:"target"`

	// ProviderSpecPatch sets only the image field(s) of providerSpec.value; set on Update.
	ProviderSpecPatch []PatchOp `json:"-"`
	// UserData is the upgraded user-data stub to write before the patch; nil when it is current.
	UserData []byte `json:"-"`
	// UserDataVersion is the Ignition version UserData was upgraded from.
	UserDataVersion string `json:"-"`
	// VSphere, on a vSphere Update, is the template import to make before the patch; nil when
	// the template is already current.
	VSphere *VSphereImport `json:"-"`
}

func (d Decision) with(action Action, reason, format string, args ...any) Decision {
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
