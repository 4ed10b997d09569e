package bootimage_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

var _ = Describe("An object's memory", func() {
	const target, selection = "ami-new", "all"
	recorded := func(count int) map[string]string {
		return map[string]string{bootimage.AttemptsAnnotation: bootimage.Attempts{Target: target, Count: count, Selection: selection}.String()}
	}

	It("counts the larger of the patches remembered and recorded, for one target and selection", func() {
		o := bootimage.Object{Annotations: recorded(2)}
		Expect(o.Attempts(target, selection)).To(Equal(2))
		o.Memory = o.Memory.Patch(bootimage.Attempts{Target: target, Count: 3, Selection: selection})
		Expect(o.Attempts(target, selection)).To(Equal(3), "the annotation was reverted with the patch")
		Expect(o.Attempts("ami-other", selection)).To(BeZero())
		Expect(o.Attempts(target, "partial")).To(BeZero(), "another selection counts afresh")
	})

	It("forgets the count once the object was seen not selected, until it is patched again", func() {
		o := bootimage.Object{Annotations: recorded(3)}
		o.Memory = o.Memory.Patch(bootimage.Attempts{Target: target, Count: 3, Selection: selection})
		o.Memory = o.Memory.Decided(bootimage.Decision{Action: bootimage.Skip, Reason: bootimage.ReasonNotSelected})
		Expect(o.Attempts(target, selection)).To(BeZero(), "opting out and back in resumes updates")
		o.Memory = o.Memory.Patch(bootimage.Attempts{Target: target, Count: 1, Selection: selection})
		Expect(o.Attempts(target, selection)).To(Equal(3), "the annotation counts again once patched")
	})

	It("times cloud failures from the first, until a lookup works", func() {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		m, failing := bootimage.Memory{}.CloudFailed(start)
		Expect(failing).To(BeZero())
		m, failing = m.CloudFailed(start.Add(time.Minute))
		Expect(failing).To(Equal(time.Minute))
		m, failing = m.CloudWorks().CloudFailed(start.Add(2 * time.Minute))
		Expect(failing).To(BeZero())
		Expect(m.CloudFailingSince).To(Equal(start.Add(2 * time.Minute)))
	})

	It("times an unavailable target from when it was first the target", func() {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		unavailable := func(target string) bootimage.Decision {
			return bootimage.Decision{Action: bootimage.Skip, Reason: bootimage.ReasonTargetImageUnavailable, Target: target}
		}
		m, lasted := bootimage.Memory{}.TargetUnavailable(unavailable("a"), start)
		Expect(lasted).To(BeZero())
		m, lasted = m.TargetUnavailable(unavailable("a"), start.Add(time.Minute))
		Expect(lasted).To(Equal(time.Minute))
		m, lasted = m.TargetUnavailable(unavailable("b"), start.Add(2*time.Minute))
		Expect(lasted).To(BeZero(), "a new target starts a new clock")
		m, lasted = m.TargetUnavailable(bootimage.Decision{Action: bootimage.NoChange}, start.Add(3*time.Minute))
		Expect(lasted).To(BeZero())
		Expect(m.Unavailable).To(BeEmpty())
	})
})
