package clusterapi_test

import (
	"encoding/json"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
)

var _ = Describe("Verification of Cluster API objects", func() {
	at := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	move := clusterapi.TemplateMove(bootimage.Decision{Current: "ami-old", Target: "ami-new"}, "w-old", "w-copy", at)
	imageFailure := regexp.MustCompile(`InvalidAMIID`)
	object := func(kind, clonedFrom string, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": kind, "metadata": map[string]any{"name": "m-1"}}}
		if clonedFrom != "" {
			u.SetAnnotations(map[string]string{clusterapi.ClonedFromNameAnnotation: clonedFrom})
		}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	condition := func(status, message string) map[string]any {
		return map[string]any{"type": "X", "status": status, "message": message}
	}

	It("records the move with the operations that point the owner back, only while it names the copy", func() {
		Expect(move).To(And(HaveField("From", "ami-old"), HaveField("To", "ami-new"), HaveField("By", bootimage.ByOperator),
			HaveField("Template", Equal(&bootimage.TemplateChange{From: "w-old", To: "w-copy"}))))
		Expect(move.Revert).To(Equal([]bootimage.PatchOp{
			{Op: "test", Path: "/spec/template/spec/infrastructureRef/name", Value: "w-copy"},
			{Op: "replace", Path: "/spec/template/spec/infrastructureRef/name", Value: "w-old"},
		}))
	})

	It("names the template a restore needs only while the newest change is the operator's and pending", func() {
		annotations := func(h bootimage.History) map[string]string {
			raw, err := json.Marshal(h)
			Expect(err).NotTo(HaveOccurred())
			return map[string]string{bootimage.HistoryAnnotation: string(raw)}
		}
		verified := move
		verified.Outcome = bootimage.Verified
		Expect(clusterapi.RestoreTemplate(annotations(bootimage.History{move}))).To(Equal("w-old"))
		Expect(clusterapi.RestoreTemplate(annotations(bootimage.History{verified}))).To(BeEmpty())
		Expect(clusterapi.RestoreTemplate(annotations(bootimage.History{move, {From: "ami-new", To: "ami-old", By: bootimage.ByRestore}}))).To(BeEmpty())
		Expect(clusterapi.RestoreTemplate(annotations(bootimage.History{{From: "a", To: "b", By: bootimage.ByOperator}}))).To(BeEmpty(), "a Machine API change")
		Expect(clusterapi.RestoreTemplate(map[string]string{bootimage.HistoryAnnotation: "{"})).To(BeEmpty())
		Expect(clusterapi.RestoreTemplate(nil)).To(BeEmpty())
	})

	It("tells a Machine's image by the template its infrastructure machine was cloned from", func() {
		machine := object("Machine", "", map[string]any{"nodeRef": map[string]any{"name": "n-1"}})
		Expect(clusterapi.MachineOf(machine, object("AWSMachine", "w-copy", nil), move, imageFailure)).To(And(HaveField("Image", "ami-new"), HaveField("Node", "n-1")))
		Expect(clusterapi.MachineOf(machine, object("AWSMachine", "w-old", nil), move, imageFailure)).To(HaveField("Image", "ami-old"))
		Expect(clusterapi.MachineOf(machine, object("AWSMachine", "w-other", nil), move, imageFailure)).To(HaveField("Image", "template w-other"))
		Expect(clusterapi.MachineOf(machine, nil, move, imageFailure)).To(HaveField("Image", ""), "no infrastructure machine yet")
	})

	It("reads the failure messages of both, the infrastructure machine's conditions, and the Machine's only when they name the image", func() {
		machine := object("Machine", "", map[string]any{"phase": "Failed",
			"deprecated": map[string]any{"v1beta1": map[string]any{"failureMessage": "machine failed"}},
			"conditions": []any{condition("False", "Waiting for a Node"), condition("False", "InvalidAMIID.NotFound"), condition("True", "InvalidAMIID.Ignored")}})
		infra := object("AWSMachine", "w-copy", map[string]any{"failureMessage": "launch failed",
			"conditions": []any{condition("False", "InsufficientInstanceCapacity"), condition("True", "ready"), condition("False", "")}})
		m := clusterapi.MachineOf(machine, infra, move, imageFailure)
		Expect(m.Failed).To(BeTrue())
		Expect(m.Errors).To(Equal([]string{"machine failed", "InvalidAMIID.NotFound", "launch failed", "InsufficientInstanceCapacity"}))
	})

	It("qualifies a Cluster API kind in the command that clears a hold", func() {
		Expect(bootimage.ClearCommand(bootimage.Decision{Kind: "MachineDeployment", APIGroup: "cluster.x-k8s.io", Namespace: "openshift-cluster-api", Name: "d"})).
			To(Equal("oc annotate machinedeployment.cluster.x-k8s.io/d -n openshift-cluster-api " + bootimage.HoldAnnotation + "-"))
		Expect(bootimage.ClearCommand(bootimage.Decision{Kind: "MachineSet", Namespace: "openshift-machine-api", Name: "w"})).
			To(Equal("oc annotate machineset.machine.openshift.io/w -n openshift-machine-api " + bootimage.HoldAnnotation + "-"))
	})
})
