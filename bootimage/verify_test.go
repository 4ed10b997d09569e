package bootimage_test

import (
	"encoding/json"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

var _ = Describe("Boot image verification", func() {
	at := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	change := bootimage.Change{From: "old", To: "new", At: at, By: bootimage.ByOperator}
	imageFailure := regexp.MustCompile(`InvalidAMIID`)
	deadline := 20 * time.Minute
	machine := func(name, image string, created time.Duration, edit func(*bootimage.Machine)) bootimage.Machine {
		m := bootimage.Machine{Name: name, Image: image, Created: at.Add(created)}
		if edit != nil {
			edit(&m)
		}
		return m
	}
	node := func(m *bootimage.Machine) { m.Node = "node" }
	errs := func(e string) func(*bootimage.Machine) {
		return func(m *bootimage.Machine) { m.Errors = []string{e} }
	}

	DescribeTable("reads the machines created since the change",
		func(now time.Duration, want bootimage.Verdict, machines ...bootimage.Machine) {
			Expect(bootimage.Verify(change, machines, imageFailure, deadline, at.Add(now))).To(Equal(want))
		},
		Entry("nothing yet", time.Minute, bootimage.Verdict{}),
		Entry("a machine that became a node verifies it", time.Minute, bootimage.Verdict{Outcome: bootimage.Verified, Machine: "m1"},
			machine("m1", "new", time.Second, node)),
		Entry("an image error fails it", time.Minute, bootimage.Verdict{Outcome: bootimage.Failed, Machine: "m1", Error: "InvalidAMIID.NotFound"},
			machine("m1", "new", time.Second, errs("InvalidAMIID.NotFound"))),
		Entry("a join anywhere beats an image error", time.Minute, bootimage.Verdict{Outcome: bootimage.Verified, Machine: "m2"},
			machine("m1", "new", time.Second, errs("InvalidAMIID.NotFound")), machine("m2", "new", 2*time.Second, node)),
		Entry("capacity is not evidence", time.Minute, bootimage.Verdict{NotEvidence: []string{"m1 (InsufficientInstanceCapacity)"}},
			machine("m1", "new", time.Second, errs("InsufficientInstanceCapacity"))),
		Entry("a machine on the old image, or made before, says nothing", time.Minute, bootimage.Verdict{},
			machine("m1", "old", time.Second, errs("InvalidAMIID.NotFound")), machine("m0", "new", -time.Hour, errs("InvalidAMIID.NotFound"))),
		Entry("a deleted machine says nothing", time.Hour, bootimage.Verdict{},
			machine("m1", "new", time.Second, func(m *bootimage.Machine) { m.Deleting = true })),
		Entry("no node before the deadline: look again at it", time.Minute, bootimage.Verdict{Recheck: at.Add(time.Second + deadline)},
			machine("m1", "new", time.Second, nil)),
		Entry("no node past the deadline while the old image's machines joined fails it", time.Hour,
			bootimage.Verdict{Outcome: bootimage.Failed, Machine: "m1", Error: "did not become a node within 20m0s of its creation, while a machine on old did"},
			machine("m1", "new", time.Second, nil), machine("m0", "old", -time.Hour, node)),
		Entry("no node past the deadline when no machine ever joined says nothing", time.Hour, bootimage.Verdict{},
			machine("m1", "new", time.Second, nil)),
	)

	It("holds the failed target until the stream moves past it, and says how to clear it", func() {
		hold, _ := json.Marshal(bootimage.Hold{Target: "new", Restored: "old", Machine: "m1", Error: "InvalidAMIID", By: bootimage.ByRestore, At: at})
		obj := bootimage.Object{Annotations: map[string]string{bootimage.HoldAnnotation: string(hold)}}
		d := bootimage.Decision{Kind: "MachineSet", Namespace: "openshift-machine-api", Name: "w", Action: bootimage.Update, Current: "old", Target: "new", ProviderSpecPatch: []bootimage.PatchOp{bootimage.Set("/image", "new")}}
		held := bootimage.Held(d, obj)
		Expect(held).To(And(HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonBootImageHeld), HaveField("ProviderSpecPatch", BeNil())))
		Expect(held.Message).To(ContainSubstring("machine m1 failed on it: InvalidAMIID"))
		Expect(held.Message).To(HaveSuffix("oc annotate machineset.machine.openshift.io/w -n openshift-machine-api bootimage.openshift.io/hold-"))
		Expect(bootimage.HoldCleared(d, obj)).To(BeFalse())

		d.Target = "newer"
		Expect(bootimage.Held(d, obj)).To(Equal(d))
		Expect(bootimage.HoldCleared(d, obj)).To(BeTrue())

		obj.Annotations[bootimage.HoldAnnotation] = "{"
		Expect(bootimage.Held(d, obj)).To(And(HaveField("Action", bootimage.Error), HaveField("Reason", bootimage.ReasonInvalidHold), HaveField("ProviderSpecPatch", BeNil())))
	})

	It("keeps a non-canary on its image until a canary machine booted the target", func() {
		d := bootimage.Decision{Action: bootimage.Update, Current: "old", Target: "new", ProviderSpecPatch: []bootimage.PatchOp{bootimage.Set("/image", "new")}}
		canaries := bootimage.Canaries{Targets: map[string]bootimage.Canary{}}
		canaries.Note("new", "canary", false, "")
		Expect(bootimage.AwaitCanary(d, bootimage.Object{}, canaries)).To(And(HaveField("Reason", bootimage.ReasonWaitingForCanary), HaveField("ProviderSpecPatch", BeNil())))
		Expect(bootimage.AwaitCanary(d, bootimage.Object{Labels: map[string]string{bootimage.CanaryLabel: "true"}}, canaries)).To(Equal(d), "a canary goes first")
		canaries.Note("new", "canary-2", true, "")
		Expect(bootimage.AwaitCanary(d, bootimage.Object{}, canaries)).To(Equal(d))
		Expect(bootimage.AwaitCanary(d, bootimage.Object{}, bootimage.Canaries{Undecided: "canary"})).To(HaveField("Reason", bootimage.ReasonWaitingForCanary))
		Expect(bootimage.AwaitCanary(d, bootimage.Object{}, bootimage.Canaries{})).To(Equal(d), "no canaries, no wait")
	})

	It("records the patch that undoes a change, and keeps the newest changes", func() {
		spec := []byte(`{"ami":{"filters":[{"name":"tag:Name","values":["x"]}]},"disks":[{"image":"old"}]}`)
		revert, ok := bootimage.RevertOps(spec, []bootimage.PatchOp{bootimage.Set("/ami", map[string]string{"id": "ami-1"}), bootimage.Set("/disks/0/image", "new"), bootimage.Set("/absent", "x")})
		Expect(ok).To(BeTrue())
		Expect(revert).To(Equal([]bootimage.PatchOp{
			bootimage.Set("/ami", map[string]any{"filters": []any{map[string]any{"name": "tag:Name", "values": []any{"x"}}}}),
			bootimage.Set("/disks/0/image", "old"),
			{Op: "remove", Path: "/absent"},
		}))
		var h bootimage.History
		for i := range bootimage.HistoryLength + 2 {
			h = h.With(bootimage.Change{To: string(rune('a' + i))})
		}
		Expect(h).To(HaveLen(bootimage.HistoryLength))
		Expect(h[0].To).To(Equal("c"))
	})

	It("reads its settings from MachineConfiguration annotations, refusing what it does not know", func() {
		Expect(bootimage.VerificationOf(nil)).To(Equal(bootimage.Verification{Enabled: true, Deadline: bootimage.DefaultVerificationDeadline}))
		Expect(bootimage.VerificationOf(map[string]string{bootimage.VerificationAnnotation: "Disabled", bootimage.VerificationDeadlineAnnotation: "45m"})).To(Equal(bootimage.Verification{Deadline: 45 * time.Minute}))
		for _, bad := range []map[string]string{{bootimage.VerificationAnnotation: "off"}, {bootimage.VerificationDeadlineAnnotation: "1m"}, {bootimage.VerificationDeadlineAnnotation: "soon"}} {
			_, err := bootimage.VerificationOf(bad)
			Expect(err).To(HaveOccurred())
		}
	})

	It("names image errors, not capacity ones, on each platform", func() {
		cases := map[configv1.PlatformType][2]string{
			configv1.AWSPlatformType:     {"api error InvalidAMIID.NotFound: The image id '[ami-1]' does not exist", "InsufficientInstanceCapacity: We currently do not have sufficient capacity"},
			configv1.GCPPlatformType:     {"Invalid value for field 'resource.disks[0].initializeParams.sourceImage'", "ZONE_RESOURCE_POOL_EXHAUSTED"},
			configv1.AzurePlatformType:   {"Code=\"ImageNotFound\" Message=\"The platform image 'RedHat:rh-ocp-worker:x:1' is not available\"", "Code=\"AllocationFailed\""},
			configv1.VSpherePlatformType: {`unable to get template "rhcos-new": vm 'rhcos-new' not found`, "InsufficientResourcesFault"},
		}
		for platform, c := range cases {
			p, ok := bootimage.PlatformFor(platform)
			Expect(ok).To(BeTrue())
			Expect(p.Traits().ImageFailure.MatchString(c[0])).To(BeTrue(), "%s: %s", platform, c[0])
			Expect(p.Traits().ImageFailure.MatchString(c[1])).To(BeFalse(), "%s: %s", platform, c[1])
		}
	})
})
