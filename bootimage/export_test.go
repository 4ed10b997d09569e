package bootimage

// What the specs of bootimage_test read of the package's internals.

const CopiedFromAnnotation = copiedFromAnnotation

var CurrentImageOf = currentImageOf
var RPMArch = kubeToRPMArch
var RollingOut = rollingOut
var Selected = isSelected
var SkewViolation = skewViolation
var TemplateCopiesOf = templateCopiesOf
var TemplateCopyName = templateCopyName

const TemplateOwnerLabel = templateOwnerLabel

var UserDataPool = userDataPool
