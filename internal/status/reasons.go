package status

import "github.com/bootimage-operator/bootimage-operator/bootimage"

// The condition and Event reasons of the status writer, in one place.

// ReasonForbidden is the Event reason of a write the operator's identity may not make: a missing
// RBAC rule, never another writer.
const ReasonForbidden = "Forbidden"

// ReasonSecondWriter is the Degraded reason and the Event reason of a second writer.
const ReasonSecondWriter = "SecondWriterDetected"

// Condition reasons and Event reasons of the status writer.
const (
	ReasonAsExpected                = bootimage.ReasonAsExpected
	ReasonInvalidSelection          = bootimage.ReasonInvalidSelection
	ReasonBootImageUpdating         = bootimage.ReasonBootImageUpdating
	ReasonBootImageUpdateFailed     = bootimage.ReasonBootImageUpdateFailed
	ReasonStatusRejected            = "StatusRejected"
	ReasonClusterBootImageSkewError = "ClusterBootImageSkewError"
)

// Reasons of ConditionBootImageUpdateSupported: bootimage.ReasonUnsupportedPlatform, the same
// reason the decisions of its objects give, or ReasonMachineAPIMissing.
const ReasonMachineAPIMissing = "MachineAPIMissing"
