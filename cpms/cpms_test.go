package cpms_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	machinev1 "github.com/openshift/api/machine/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/cpms"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

func TestCPMS(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "cpms")
}

func update(ops ...bootimage.PatchOp) bootimage.Decision {
	return bootimage.Decision{Kind: "ControlPlaneMachineSet", Action: bootimage.Update, Reason: bootimage.ReasonImageOutdated, Target: fixtures.NewAWSAMIUSEast1, ProviderSpecPatch: ops}
}

var _ = Describe("ControlPlaneMachineSet decisions", func() {
	active := func() *machinev1.ControlPlaneMachineSet {
		c := fixtures.ControlPlaneMachineSet(fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), machinev1.ControlPlaneMachineSetStateActive)
		c.ResourceVersion = "42"
		return c
	}
	attempts := bootimage.Attempts{Target: fixtures.NewAWSAMIUSEast1, Count: 1, Selection: "all"}

	It("keeps an image-only update", func() {
		d := cpms.Decide(active(), update(bootimage.PatchOp{Op: "add", Path: "/ami/id", Value: fixtures.NewAWSAMIUSEast1}), attempts)
		Expect(d.Action).To(Equal(bootimage.Update))
	})

	DescribeTable("refuses anything that is not image-only",
		func(op bootimage.PatchOp, changed string) {
			d := cpms.Decide(active(), update(bootimage.PatchOp{Op: "add", Path: "/ami/id", Value: fixtures.NewAWSAMIUSEast1}, op), attempts)
			Expect(d.Action).To(Equal(bootimage.Error))
			Expect(d.Reason).To(Equal(cpms.ReasonNotImageOnly))
			Expect(d.Message).To(ContainSubstring("not image-only, it also changes " + changed + ", which"))
			Expect(d.ProviderSpecPatch).To(BeNil())
		},
		Entry("the instance type", bootimage.PatchOp{Op: "replace", Path: "/instanceType", Value: "m6i.2xlarge"}, "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value/instanceType"),
		Entry("the subnet", bootimage.PatchOp{Op: "remove", Path: "/subnet"}, "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value/subnet"),
		Entry("an unknown field", bootimage.PatchOp{Op: "add", Path: "/futureField/keptAsIs/0", Value: 7}, "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value/futureField/keptAsIs"),
	)

	It("refuses a patch that does not apply to the object as read", func() {
		d := cpms.Decide(active(), update(bootimage.PatchOp{Op: "replace", Path: "/no/such/field", Value: 1}), attempts)
		Expect(d).To(And(HaveField("Action", bootimage.Error), HaveField("Reason", cpms.ReasonNotImageOnly)))
		Expect(d.Message).To(ContainSubstring("does not apply"))
	})

	It("skips an Inactive CPMS", func() {
		c := active()
		c.Spec.State = machinev1.ControlPlaneMachineSetStateInactive
		d := cpms.Decide(c, update(bootimage.PatchOp{Op: "add", Path: "/ami/id", Value: fixtures.NewAWSAMIUSEast1}), attempts)
		Expect(d).To(And(HaveField("Action", bootimage.Skip), HaveField("Reason", cpms.ReasonInactive)))
	})

	It("names every missing piece of the template", func() {
		c := active()
		c.Spec.Template.OpenShiftMachineV1Beta1Machine = nil
		Expect(cpms.Object(c).Problem).To(Equal("spec.template.machines_v1beta1_machine_openshift_io is missing"))
		c = active()
		c.Spec.Template.MachineType = "machines_v1alpha1_machine_openshift_io"
		Expect(cpms.Object(c).Problem).To(ContainSubstring(`machineType is "machines_v1alpha1_machine_openshift_io"`))
		c = active()
		c.Name = "other"
		Expect(cpms.Object(c).Problem).To(ContainSubstring(`not the singleton "cluster"`))
		c = active()
		c.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value = nil
		Expect(cpms.Object(c).ProviderSpec).To(BeNil())
	})
})
