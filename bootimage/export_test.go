package bootimage

// What the specs of bootimage_test read of the package's internals.

var RPMArch = kubeToRPMArch
var Selected = isSelected
var SkewViolation = skewViolation

var UserDataPool = userDataPool

var AwaitCanary = awaitCanary
var Held = held

const DefaultVerificationDeadline = defaultVerificationDeadline
