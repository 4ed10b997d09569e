package clusterapi

// What the specs of clusterapi_test read of the package's internals.

const CopiedFromAnnotation = copiedFromAnnotation
const TemplateOwnerLabel = templateOwnerLabel

var RollingOut = rollingOut
var TemplateCopiesOf = templateCopiesOf
var TemplateCopyName = templateCopyName
