package steps

// The Event reasons of the boot image steps; the verification's are in verify.go.

// ReasonTemplateImportFailed is the reason of an Error decision whose vCenter import failed.
const ReasonTemplateImportFailed = "TemplateImportFailed"

// Events of updates, besides the decision reasons.
const (
	ReasonBootImageUpdated = "BootImageUpdated"
	ReasonUserDataUpgraded = "UserDataUpgraded"
)

// ReasonCopyingImage is the Normal Event of an object whose update started an AMI copy.
const ReasonCopyingImage = "CopyingImage"
