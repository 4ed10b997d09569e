package bootimage_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

var _ = Describe("Canaries", func() {
	historyOf := func(changes ...bootimage.Change) map[string]string {
		raw, err := json.Marshal(bootimage.History(changes))
		Expect(err).NotTo(HaveOccurred())
		return map[string]string{bootimage.HistoryAnnotation: string(raw)}
	}

	It("notes a canary's targets from its operator changes and its decision", func() {
		var c bootimage.Canaries
		c.NoteCanary("MachineSet a", historyOf(
			bootimage.Change{To: "old", By: bootimage.ByOperator, Outcome: bootimage.Verified},
			bootimage.Change{To: "manual", By: bootimage.ByRestore},
			bootimage.Change{To: "new", By: bootimage.ByOperator, Outcome: bootimage.Failed, Machine: "a-1", Error: "InvalidAMIID.NotFound"},
		), bootimage.Decision{Action: bootimage.Skip, Reason: bootimage.ReasonBootImageHeld, Target: "new"}, true)
		Expect(c.Targets).To(Equal(map[string]bootimage.Canary{
			"old": {Object: "MachineSet a", Verified: true},
			"new": {Object: "MachineSet a", Failed: "machine a-1: InvalidAMIID.NotFound"},
		}), "changes not the operator's say nothing of a target")
		Expect(c.Undecided).To(BeEmpty())
	})

	It("gates the others until a canary verified the target, naming the canary", func() {
		var c bootimage.Canaries
		c.NoteCanary("MachineDeployment md", nil, bootimage.Decision{Action: bootimage.Skip, Reason: bootimage.ReasonMachineDeploymentRollingOut, Target: "new"}, true)
		d := bootimage.Decision{Action: bootimage.Update, Current: "old", Target: "new"}
		Expect(bootimage.AwaitCanary(d, bootimage.Object{}, c)).To(And(HaveField("Reason", bootimage.ReasonWaitingForCanary),
			HaveField("Message", ContainSubstring("canary MachineDeployment md has new and no machine of it has booted it yet"))), "a canary rolling out still goes first")
		c.NoteCanary("MachineSet b", historyOf(bootimage.Change{To: "new", By: bootimage.ByOperator, Outcome: bootimage.Verified}), bootimage.Decision{Action: bootimage.NoChange}, true)
		Expect(bootimage.AwaitCanary(d, bootimage.Object{}, c)).To(Equal(d))
	})

	It("says a canary not decided yet", func() {
		var c bootimage.Canaries
		c.NoteCanary("MachineSet a", nil, bootimage.Decision{}, false)
		Expect(c.Undecided).To(Equal("MachineSet a"))
		Expect(c.Targets).To(BeEmpty())
	})
})
