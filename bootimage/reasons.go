package bootimage

// The reasons of this package, in one place: of decisions (their Events, conditions and the
// plan's rows), of the OS stream Warning, and of the status conditions.

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
	ReasonArchitectureUnknown     = "ArchitectureUnknown"
	ReasonArchitectureNotInStream = "ArchitectureNotInStream"
	ReasonRegionNotInStream       = "RegionNotInStream"
	ReasonCustomImage             = "CustomImage"
	ReasonImageNotByID            = "ImageNotByID"
	ReasonConfidentialVM          = "ConfidentialVM"
	ReasonUnsupportedArchitecture = "UnsupportedArchitecture"
	ReasonTargetImageUnavailable  = "TargetImageUnavailable"
	// ReasonOSStreamNotInBootImages: the object's OS stream (its label, or its pool's) is not in
	// coreos-bootimages; no other stream's image is given instead.
	ReasonOSStreamNotInBootImages = "OSStreamNotInBootImages"
	// ReasonOSStreamTemplateTaken: every vSphere template name of the object's OS stream holds a
	// template of another RHEL major, which is never overwritten.
	ReasonOSStreamTemplateTaken = "OSStreamTemplateTaken"

	ReasonInvalidArchitecture = "InvalidArchitecture"
	ReasonInvalidProviderSpec = "InvalidProviderSpec"
	ReasonInvalidStream       = "InvalidStream"
	ReasonStreamMissing       = "StreamMissing"
	ReasonInvalidUserData     = "InvalidUserData"
	ReasonHotLoopDetected     = "HotLoopDetected"
	ReasonInvalidTemplate     = "InvalidTemplate"
	// ReasonImageNotFound: the cloud does not know the object's current image where it launches
	// machines (an AMI not in the MachineSet's region), so it cannot boot as it is.
	ReasonImageNotFound = "ImageNotFound"
	// ReasonCloudLookupFailed: a cloud API call the decision needs kept failing for longer than
	// the operator waits; the message carries the API's error.
	ReasonCloudLookupFailed = "CloudLookupFailed"

	// ReasonAuthorityClusterAPI: a Machine API MachineSet whose status.authoritativeAPI is
	// ClusterAPI; its Cluster API twin is the one to update.
	ReasonAuthorityClusterAPI = "AuthorityClusterAPI"
	// ReasonAuthorityMachineAPI: a Cluster API MachineSet whose Machine API twin is in charge.
	ReasonAuthorityMachineAPI = "AuthorityMachineAPI"
	// ReasonMigrating: the MachineSet is moving between the Machine API and Cluster API; neither
	// side is written until it settles.
	ReasonMigrating = "Migrating"
	// ReasonOwnedByMachineDeployment: a Cluster API MachineSet whose template is its
	// MachineDeployment's, which is decided on instead.
	ReasonOwnedByMachineDeployment = "OwnedByMachineDeployment"
	// ReasonManagedByTopology: a Cluster API object of a ClusterClass topology, whose templates
	// the topology controller writes.
	ReasonManagedByTopology = "ManagedByTopology"
	// ReasonUnsupportedTemplate: a Cluster API object whose infrastructure template is of a kind
	// this operator does not manage on the cluster's platform.
	ReasonUnsupportedTemplate = "UnsupportedTemplate"
	// ReasonMachineDeploymentRollingOut: a MachineDeployment due for an update is still replacing
	// Machines; a second change would replace Machines that are themselves new.
	ReasonMachineDeploymentRollingOut = "MachineDeploymentRollingOut"
	// ReasonTemplateConflict: a template of the copy's name exists with other content; it is never
	// overwritten.
	ReasonTemplateConflict = "TemplateConflict"
	// ReasonDeniedByPolicy: an admission policy refused the update for good (422 Invalid, e.g.
	// OpenShift's openshift-cluster-api-deny-unsupported-resources); decided again on a change.
	ReasonDeniedByPolicy = "DeniedByPolicy"
	// ReasonPaused: a Cluster API object annotated cluster.x-k8s.io/paused, which every Cluster
	// API controller leaves alone; decided again when the annotation goes.
	ReasonPaused = "Paused"
)

// Reasons of AWS AMI copies (bootimage/aws): where the stream has no AMI of the region, the
// cluster runs on a copy of its us-east-1 AMI, which the operator makes anew as the stream moves.
const (
	// ReasonCopyNotPermitted: EC2 refused the copy for good (a right or quota missing), or its
	// credentials Secret is missing.
	ReasonCopyNotPermitted = "CopyNotPermitted"
	// ReasonCopyFailed: a copy ended failed, or stayed pending past its deadline.
	ReasonCopyFailed = "CopyFailed"
)

// Reasons of boot image verification (verify.go): a new boot image is trusted once a machine
// has booted it.
const (
	// ReasonBootImageHeld: a machine failed on the target, the object was restored to the image it
	// replaced, and stays there until the stream moves past the target or an admin clears the hold.
	ReasonBootImageHeld = "BootImageHeld"
	// ReasonWaitingForCanary: a canary object (label bootimage.openshift.io/canary=true) has the
	// same target and no machine of it has booted the target yet.
	ReasonWaitingForCanary = "WaitingForCanary"
	// ReasonInvalidHold: the object's hold annotation cannot be read; nothing is written until it
	// is fixed or removed.
	ReasonInvalidHold = "InvalidHold"
)

// Reasons of vSphere decisions.
const (
	// ReasonFailureDomainMismatch: the MachineSet's workspace matches no failure domain of the
	// Infrastructure, so the operator does not know where its template belongs.
	ReasonFailureDomainMismatch = "FailureDomainMismatch"
	// ReasonVCenterNotConsulted: the template's RHCOS version is unknown because vCenter was not
	// asked (no credentials, or an offline plan).
	ReasonVCenterNotConsulted = "VCenterNotConsulted"
	// ReasonTemplateNameTooLong: the managed template's name exceeds vSphere's 80 characters.
	ReasonTemplateNameTooLong = "TemplateNameTooLong"
)

// ReasonOSStreamMismatch is the Warning Event beside a decision whose object's labels or pool
// disagree with the OS stream its boot image comes from (OSStreamChoice.Note).
const ReasonOSStreamMismatch = "OSStreamMismatch"

// Reasons of the status conditions.
const (
	ReasonAsExpected            = "AsExpected"
	ReasonInvalidSelection      = "InvalidSelection"
	ReasonBootImageUpdating     = "BootImageUpdating"
	ReasonBootImageUpdateFailed = "BootImageUpdateFailed"
	// ReasonBootImageRestored: Degraded because an object was put back on its previous boot image.
	ReasonBootImageRestored = "BootImageRestored"
)
