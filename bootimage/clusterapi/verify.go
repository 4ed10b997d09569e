package clusterapi

import (
	"regexp"
	"time"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Labels Cluster API puts on the Machines (and, through them, the infrastructure machines) a
// MachineSet or MachineDeployment creates.
const (
	SetNameLabel        = "cluster.x-k8s.io/set-name"
	DeploymentNameLabel = "cluster.x-k8s.io/deployment-name"
)

// TemplateMove is the change an update of a Cluster API object records: from d.Current to
// d.Target by pointing it from template from to the copy to, and the operations that point it
// back, only while it still names the copy.
func TemplateMove(d bootimage.Decision, from, to string, at time.Time) bootimage.Change {
	return bootimage.Change{From: d.Current, To: d.Target, At: at, By: bootimage.ByOperator,
		Revert: []bootimage.PatchOp{
			{Op: "test", Path: infrastructureRefNamePath, Value: to},
			{Op: "replace", Path: infrastructureRefNamePath, Value: from},
		},
		Template: &bootimage.TemplateChange{From: from, To: to}}
}

// RestoreTemplate is the template a restore of the object with annotations would point it back
// at: its newest change's Template.From while that change is the operator's and pending, ""
// otherwise. The collector keeps it.
func RestoreTemplate(annotations map[string]string) string {
	h, err := bootimage.HistoryOf(annotations)
	c, ok := h.Newest()
	if err != nil || !ok || c.By != bootimage.ByOperator || c.Outcome != "" || c.Template == nil {
		return ""
	}
	return c.Template.From
}

// MachineOf reduces a Cluster API Machine, with its infrastructure machine (nil when not
// found), for Verify of change c. Its image is c.To when the infrastructure machine was cloned
// from c's copy (annotation cluster.x-k8s.io/cloned-from-name), c.From when from the template c
// replaced. Its errors are the failure messages of both, the messages of the infrastructure
// machine's conditions that are not True (the provider's answer to a launch, as a Machine API
// providerStatus holds it), and those of the Machine's own that imageFailure names: Cluster API
// sets a Machine's conditions False with a message while it merely provisions, which is no error.
func MachineOf(machine, infra *unstructured.Unstructured, c bootimage.Change, imageFailure *regexp.Regexp) bootimage.Machine {
	m := bootimage.Machine{Name: machine.GetName(), Created: machine.GetCreationTimestamp().Time, Deleting: machine.GetDeletionTimestamp() != nil}
	clonedFrom := machine.GetAnnotations()[ClonedFromNameAnnotation]
	if infra != nil && infra.GetAnnotations()[ClonedFromNameAnnotation] != "" {
		clonedFrom = infra.GetAnnotations()[ClonedFromNameAnnotation]
	}
	switch {
	case clonedFrom == "" || c.Template == nil:
	case clonedFrom == c.Template.To:
		m.Image = c.To
	case clonedFrom == c.Template.From:
		m.Image = c.From
	default:
		m.Image = "template " + clonedFrom
	}
	m.Node, _, _ = unstructured.NestedString(machine.Object, "status", "nodeRef", "name")
	phase, _, _ := unstructured.NestedString(machine.Object, "status", "phase")
	m.Failed = phase == "Failed"
	m.Errors = failureMessages(machine)
	for _, msg := range notTrueMessages(machine) {
		if imageFailure != nil && imageFailure.MatchString(msg) {
			m.Errors = append(m.Errors, msg)
		}
	}
	if infra != nil {
		m.Errors = append(m.Errors, failureMessages(infra)...)
		m.Errors = append(m.Errors, notTrueMessages(infra)...)
	}
	return m
}

// failureMessages are obj's status.failureMessage, where it sits before and after Cluster API's
// v1beta2 (status.deprecated.v1beta1).
func failureMessages(obj *unstructured.Unstructured) []string {
	var out []string
	for _, path := range [][]string{{"status", "failureMessage"}, {"status", "deprecated", "v1beta1", "failureMessage"}} {
		if msg, _, _ := unstructured.NestedString(obj.Object, path...); msg != "" {
			out = append(out, msg)
		}
	}
	return out
}

// notTrueMessages are the messages of obj's conditions that are not True, v1beta2's and the
// deprecated v1beta1 ones.
func notTrueMessages(obj *unstructured.Unstructured) []string {
	var out []string
	for _, path := range [][]string{{"status", "conditions"}, {"status", "deprecated", "v1beta1", "conditions"}, {"status", "v1beta2", "conditions"}} {
		conditions, _, _ := unstructured.NestedSlice(obj.Object, path...)
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["status"] != "True" {
				if msg, _ := c["message"].(string); msg != "" {
					out = append(out, msg)
				}
			}
		}
	}
	return out
}
