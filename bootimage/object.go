package bootimage

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WindowsLabel on a MachineSet's machine template marks Windows workers, whose images are not RHCOS.
const WindowsLabel = "machine.openshift.io/os-id"

// Cluster is the cluster-wide input of a decision.
type Cluster struct {
	Platform           configv1.PlatformType
	InfrastructureName string
	// Infrastructure is Infrastructure/cluster, for the platform's own fields of it; nil when
	// missing.
	Infrastructure *configv1.Infrastructure
	// Gates is nil while the gates are unknown; GatesError says why.
	Gates      Gates
	GatesError error
	Effective  operatorv1.ManagedBootImages
	// Stable is true while the newest ClusterVersion history entry is Completed.
	Stable    bool
	MultiArch bool
	// ControlPlaneArch is the control plane's Kubernetes architecture.
	ControlPlaneArch string
	// BootImages is the coreos-bootimages ConfigMap; nil when missing.
	BootImages *corev1.ConfigMap
	// ParseStreams, when set, parses BootImages instead of ParseBootImages: the operator's cache,
	// shared across decisions, parses one ConfigMap version once.
	ParseStreams func(*corev1.ConfigMap) (*Streams, error)
	// Cloud looks the platform's images up, as the interface its folder defines (Clouds); nil
	// when none is available, as offline.
	Cloud any
	// PoolStreams maps each MachineConfigPool to its spec.osImageStream.name ("" when unset).
	PoolStreams map[string]string
	// DefaultOSStream is OSImageStream cluster's status.defaultStream; "" without one.
	DefaultOSStream string
	// Verification is how new boot images are verified (VerificationOf).
	Verification Verification
	// Canaries are what the canary objects say; zero without canaries.
	Canaries Canaries
}

// Object is a MachineSet or ControlPlaneMachineSet of the Machine API, or a MachineSet or
// MachineDeployment of Cluster API, reduced to what decisions read.
type Object struct {
	Kind, Namespace, Name string
	// APIGroup is ClusterAPIGroup for Cluster API objects, "" for the Machine API's.
	APIGroup            operatorv1.MachineManagerMachineSetsAPIGroupType
	Resource            operatorv1.MachineManagerMachineSetsResourceType
	Labels, Annotations map[string]string
	TemplateLabels      map[string]string
	OwnerReferences     []metav1.OwnerReference
	// ProviderSpec is the raw providerSpec.value, or a Cluster API infrastructure machine
	// template's spec.template.spec; nil when missing.
	ProviderSpec []byte
	// TemplateKind is the Cluster API infrastructure machine template's kind; "" for the Machine API.
	TemplateKind string
	// Authority is a Machine API MachineSet's status.authoritativeAPI.
	Authority machinev1beta1.MachineAuthority
	// Twin, on a Cluster API MachineSet, is the status.authoritativeAPI of the Machine API
	// MachineSet of the same name; nil when there is none.
	Twin *machinev1beta1.MachineAuthority
	// Machines, on a MachineDeployment, is how many Machines it owns: all are replaced when its
	// template changes.
	Machines int
	// RollingOut, on a MachineDeployment, is whether it is still replacing Machines (see rollingOut).
	RollingOut bool
	// UserData is the user-data Secret's stub; nil when it was not looked up.
	UserData *UserData
	// Patched is the attempts of the operator's last patch of the object as it remembers them
	// (whoever reverts the object may remove the annotation too); zero for bootimagectl, which
	// remembers nothing.
	Patched Attempts
	// OptedOut is whether the operator saw the object not selected since that patch: the
	// annotation's count then no longer counts, so opting out and back in resumes updates, as
	// the hot-loop message promises.
	OptedOut bool
	// Problem, when set, is an Error InvalidTemplate: the object has no usable template.
	Problem string
}

// UserData is the content of a user-data Secret, as found.
type UserData struct {
	SecretName string
	Found      bool
	Data       []byte
	// ResourceVersion is the Secret's as read: an upgraded stub is written only over that read.
	ResourceVersion string
}

// Kinds of the objects decided on.
const (
	KindMachineSet             = "MachineSet"
	KindControlPlaneMachineSet = "ControlPlaneMachineSet"
)

// MachineSetObject reduces a MachineSet.
func MachineSetObject(ms *machinev1beta1.MachineSet) Object {
	o := Object{
		Kind: KindMachineSet, Namespace: ms.Namespace, Name: ms.Name, Resource: operatorv1.MachineSets,
		Labels: ms.Labels, Annotations: ms.Annotations, TemplateLabels: ms.Spec.Template.Labels,
		OwnerReferences: ms.OwnerReferences, Authority: ms.Status.AuthoritativeAPI,
	}
	if v := ms.Spec.Template.Spec.ProviderSpec.Value; v != nil {
		o.ProviderSpec = v.Raw
	}
	return o
}

// ControlPlaneMachineSetObject reduces a ControlPlaneMachineSet.
func ControlPlaneMachineSetObject(cpms *machinev1.ControlPlaneMachineSet) Object {
	o := Object{
		Kind: KindControlPlaneMachineSet, Namespace: cpms.Namespace, Name: cpms.Name, Resource: operatorv1.ControlPlaneMachineSets,
		Labels: cpms.Labels, Annotations: cpms.Annotations, OwnerReferences: cpms.OwnerReferences,
	}
	switch t := cpms.Spec.Template; {
	case t.MachineType != machinev1.OpenShiftMachineV1Beta1MachineType:
		o.Problem = fmt.Sprintf("spec.template.machineType is %q; only %s templates have a boot image to manage", t.MachineType, machinev1.OpenShiftMachineV1Beta1MachineType)
	case t.OpenShiftMachineV1Beta1Machine == nil:
		o.Problem = "spec.template.machines_v1beta1_machine_openshift_io is missing"
	default:
		o.TemplateLabels = t.OpenShiftMachineV1Beta1Machine.ObjectMeta.Labels
		if v := t.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value; v != nil {
			o.ProviderSpec = v.Raw
		}
	}
	return o
}
