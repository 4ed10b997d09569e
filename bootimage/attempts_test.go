package bootimage_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

var _ = Describe("An object's attempts", func() {
	const target, selection = "ami-new", "all"
	recorded := func(count int) map[string]string {
		return map[string]string{bootimage.AttemptsAnnotation: bootimage.Attempts{Target: target, Count: count, Selection: selection}.String()}
	}

	It("counts the larger of the patches remembered and recorded, for one target and selection", func() {
		o := bootimage.Object{Annotations: recorded(2)}
		Expect(o.Attempts(target, selection)).To(Equal(2))
		o.Patched = bootimage.Attempts{Target: target, Count: 3, Selection: selection}
		Expect(o.Attempts(target, selection)).To(Equal(3), "the annotation was reverted with the patch")
		Expect(o.Attempts("ami-other", selection)).To(BeZero())
		Expect(o.Attempts(target, "partial")).To(BeZero(), "another selection counts afresh")
	})

	It("does not count the annotation of an object seen opted out since", func() {
		o := bootimage.Object{Annotations: recorded(3), OptedOut: true}
		Expect(o.Attempts(target, selection)).To(BeZero(), "opting out and back in resumes updates")
	})
})
