package controllers

// The Event reasons of the controllers; those of the boot image steps are package steps's
// (steps/reasons.go), those of decisions bootimage's (bootimage/reasons.go), those of the status
// writer internal/status's.

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
