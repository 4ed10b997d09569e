// Package clusterapi is the boot image domain of Cluster API MachineSets and MachineDeployments:
// reading an owner and its infrastructure machine template into a bootimage.Object, the template
// copy an update makes (infrastructure machine templates are immutable), which copies may be
// collected, a paused owner, and the evidence and restore of a template move. Pure: unstructured
// objects in, decisions and patches out.
package clusterapi

import (
	"encoding/json"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

const (
	// InfrastructureGroup is the API group of infrastructure machine templates.
	InfrastructureGroup = "infrastructure.cluster.x-k8s.io"
	// ClonedFromNameAnnotation on a Machine or infrastructure machine names the template it was
	// made from.
	ClonedFromNameAnnotation = "cluster.x-k8s.io/cloned-from-name"
	// CAPIOperatorTemplateLabel marks the templates cluster-capi-operator made for a mirrored
	// MachineSet; it deletes them itself.
	CAPIOperatorTemplateLabel = "machine.openshift.io/cluster-api-machineset"
)

// TemplateRef names an infrastructure machine template, as spec.template.spec.infrastructureRef
// does (same namespace as the referrer).
type TemplateRef struct {
	APIGroup string `json:"apiGroup"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

// InfrastructureRef returns the template a Cluster API MachineSet or MachineDeployment names.
func InfrastructureRef(owner *unstructured.Unstructured) (TemplateRef, error) {
	ref, found, err := unstructured.NestedStringMap(owner.Object, "spec", "template", "spec", "infrastructureRef")
	if err != nil || !found {
		return TemplateRef{}, fmt.Errorf("spec.template.spec.infrastructureRef is missing or not an object of strings")
	}
	r := TemplateRef{APIGroup: ref["apiGroup"], Kind: ref["kind"], Name: ref["name"]}
	if r.Kind == "" || r.Name == "" {
		return r, fmt.Errorf("spec.template.spec.infrastructureRef has no kind or name")
	}
	return r, nil
}

// ObjectOf reduces a Cluster API MachineSet or MachineDeployment (owner), with the
// infrastructure machine template it names (nil when it was not found) and, for a MachineSet, the
// status.authoritativeAPI of its Machine API twin (nil when there is none). A MachineDeployment's
// Machines are its status.replicas.
func ObjectOf(owner, template *unstructured.Unstructured, twin *machinev1beta1.MachineAuthority) bootimage.Object {
	o := bootimage.Object{
		Kind: owner.GetKind(), Namespace: owner.GetNamespace(), Name: owner.GetName(), APIGroup: bootimage.ClusterAPIGroup,
		Resource: operatorv1.MachineSets, Labels: owner.GetLabels(), Annotations: owner.GetAnnotations(),
		OwnerReferences: owner.GetOwnerReferences(), Twin: twin,
	}
	if o.Kind == bootimage.KindMachineDeployment {
		o.Resource = bootimage.MachineDeployments
		replicas, _, _ := unstructured.NestedInt64(owner.Object, "status", "replicas")
		o.Machines, o.RollingOut = int(replicas), rollingOut(owner)
	}
	o.TemplateLabels, _, _ = unstructured.NestedStringMap(owner.Object, "spec", "template", "metadata", "labels")
	ref, err := InfrastructureRef(owner)
	switch {
	case err != nil:
		o.Problem = err.Error()
		return o
	case template == nil:
		o.Problem = fmt.Sprintf("infrastructure template %s %s/%s not found", ref.Kind, o.Namespace, ref.Name)
		return o
	case template.GetKind() != ref.Kind || template.GetName() != ref.Name:
		o.Problem = fmt.Sprintf("the template given is %s %s, not the infrastructureRef's %s %s", template.GetKind(), template.GetName(), ref.Kind, ref.Name)
		return o
	}
	o.TemplateKind = template.GetKind()
	spec, found, err := unstructured.NestedMap(template.Object, "spec", "template", "spec")
	if err != nil || !found {
		o.Problem = fmt.Sprintf("%s %s has no spec.template.spec", ref.Kind, ref.Name)
		return o
	}
	o.ProviderSpec, _ = json.Marshal(spec)
	return o
}

// rollingOut reports whether a MachineDeployment is still replacing Machines: its controller has
// not yet seen its latest spec, or its RollingOut condition is True.
func rollingOut(md *unstructured.Unstructured) bool {
	observed, found, _ := unstructured.NestedInt64(md.Object, "status", "observedGeneration")
	if !found || observed < md.GetGeneration() {
		return true
	}
	conditions, _, _ := unstructured.NestedSlice(md.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == "RollingOut" && c["status"] == "True" {
			return true
		}
	}
	return false
}

// GroupVersion is the version of the Cluster API objects this operator reads.
var GroupVersion = schema.GroupVersion{Group: string(bootimage.ClusterAPIGroup), Version: "v1beta2"}

// PausedAnnotation is Cluster API's pause contract (cluster-api util/annotations.IsPaused): an
// object carrying it is left alone by every controller, whatever its value; clusterctl move sets it.
const PausedAnnotation = "cluster.x-k8s.io/paused"

// ClusterName is the Cluster a Cluster API MachineSet or MachineDeployment belongs to
// (spec.clusterName), "" when it names none.
func ClusterName(owner *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(owner.Object, "spec", "clusterName")
	return name
}

// Paused returns d as Skip Paused when owner carries PausedAnnotation or its Cluster (nil when
// there is none) has spec.paused true, and d would write or report an error: nothing of a paused
// object is written, its template copies included. A skip stays.
func Paused(d bootimage.Decision, owner, cluster *unstructured.Unstructured) bootimage.Decision {
	if d.Action == bootimage.Skip {
		return d
	}
	why := PausedBecause(owner, cluster)
	if why == "" {
		return d
	}
	d.ProviderSpecPatch, d.UserData = nil, nil
	return d.With(bootimage.Skip, bootimage.ReasonPaused, "%s %s/%s is paused (%s): its boot image is decided again once it is resumed", d.Kind, d.Namespace, d.Name, why)
}

// PausedBecause says why owner is paused, "" when it is not: its PausedAnnotation, or its
// Cluster's spec.paused (cluster nil when there is none).
func PausedBecause(owner, cluster *unstructured.Unstructured) string {
	if _, paused := owner.GetAnnotations()[PausedAnnotation]; paused {
		return "annotation " + PausedAnnotation
	}
	if cluster == nil {
		return ""
	}
	if paused, _, _ := unstructured.NestedBool(cluster.Object, "spec", "paused"); paused {
		return fmt.Sprintf("Cluster %s has spec.paused", cluster.GetName())
	}
	return ""
}
