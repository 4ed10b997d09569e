package controllers

// The Event reasons of the controllers, in one place; those of decisions are bootimage's
// (bootimage/reasons.go), those of the status writer internal/status's.

// ReasonClusterAPINotStarted is the reason of the Warning Event (and the Degraded message) saying
// that the Cluster API controllers wait: for an RBAC rule, or after they stopped.
const ReasonClusterAPINotStarted = "ClusterAPIControllersNotStarted"

// ReasonKindNotAvailable is the reason of the Warning Event (and the Degraded message) saying
// that a kind the controllers can do without is not served, or that its cache has not synced, and
// what they do meanwhile.
const ReasonKindNotAvailable = "KindNotAvailable"

// Event reasons of the feature gate reporter.
const (
	ReasonFeatureGatesRead    = "FeatureGatesRead"
	ReasonFeatureGatesUnknown = "FeatureGatesUnknown"
)

// ReasonClusterVersionMissing is the Event reason of a missing ClusterVersion/version: nothing is
// wrong with the selection, the operator only lacks the release history.
const ReasonClusterVersionMissing = "ClusterVersionMissing"

// ReasonTemplateImportFailed is the reason of an Error decision whose vCenter import failed.
const ReasonTemplateImportFailed = "TemplateImportFailed"

// Events of updates, besides the decision reasons.
const (
	ReasonBootImageUpdated = "BootImageUpdated"
	ReasonUserDataUpgraded = "UserDataUpgraded"
)

// ReasonCopyingImage is the Normal Event of an object whose update started an AMI copy.
const ReasonCopyingImage = "CopyingImage"
