package status

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

func msDecision(name string, action bootimage.Action, reason string) bootimage.Decision {
	return bootimage.Decision{Kind: bootimage.KindMachineSet, Namespace: "openshift-machine-api", Name: name, Action: action, Reason: reason, Message: "m-" + name}
}

var _ = Describe("Progress", func() {
	It("keeps a True Degraded while an object is not yet decided, as after a restart", func() {
		hotLoop := metav1.Condition{Type: ConditionBootImageUpdateDegraded, Status: metav1.ConditionTrue, Reason: bootimage.ReasonBootImageUpdateFailed, Message: "hot loop", ObservedGeneration: 1}
		undecided := Progress{}
		undecided.MachineSets.Total = 1
		_, fresh := ProgressConditions(2, undecided, nil)
		Expect(fresh.Status).To(Equal(metav1.ConditionFalse))
		kept := KeepDegraded([]metav1.Condition{hotLoop}, fresh, undecided)
		Expect(kept).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", "hot loop"), HaveField("ObservedGeneration", int64(2))))

		decided := undecided
		decided.Add(msDecision("a", bootimage.NoChange, bootimage.ReasonUpToDate))
		_, clean := ProgressConditions(2, decided, nil)
		Expect(KeepDegraded([]metav1.Condition{hotLoop}, clean, decided)).To(Equal(clean), "a finished pass without errors clears it")
		Expect(KeepDegraded(nil, fresh, undecided)).To(Equal(fresh), "nothing to keep")
	})

	It("tallies decisions per resource and names the failed ones, sorted and bounded", func() {
		p := Progress{}
		p.MachineSets.Total, p.ControlPlaneMachineSets.Total = 9, 1
		p.Add(msDecision("a", bootimage.NoChange, bootimage.ReasonUpToDate))
		p.Add(msDecision("b", bootimage.Skip, bootimage.ReasonNotSelected))
		p.Add(msDecision("c", bootimage.Update, bootimage.ReasonImageOutdated))
		for _, n := range []string{"z", "y", "x", "w", "v", "u"} {
			p.Add(msDecision(n, bootimage.Error, bootimage.ReasonInvalidProviderSpec))
		}
		p.Add(bootimage.Decision{Kind: bootimage.KindControlPlaneMachineSet, Name: "cluster", Action: bootimage.Skip, Reason: bootimage.ReasonFeatureGateDisabled})

		Expect(p.MachineSets).To(Equal(Tally{Total: 9, Decided: 9, Reconciled: 2, Skipped: 1, Updating: 1, Errored: 6}))
		Expect(p.ControlPlaneMachineSets).To(Equal(Tally{Total: 1, Decided: 1, Reconciled: 1, Skipped: 1}))
		Expect(p.Counts()).To(Equal("Reconciled 2 of 9 MAPI MachineSets (1 skipped, 6 failed) | Reconciled 1 of 1 ControlPlaneMachineSets (1 skipped)"))

		progressing, degraded := ProgressConditions(7, p, []string{"stream lacks x86_64"})
		Expect(progressing).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", bootimage.ReasonBootImageUpdating), HaveField("ObservedGeneration", int64(7))))
		Expect(degraded.Status).To(Equal(metav1.ConditionTrue))
		Expect(degraded.Message).To(HavePrefix(p.Counts() + " | 6 failed: MachineSet openshift-machine-api/u: "))
		Expect(degraded.Message).NotTo(ContainSubstring("/z:"), "at most five errors are listed")
		Expect(degraded.Message).To(HaveSuffix(" | stream lacks x86_64"))
	})

	It("counts an object in error as failed, not as left to do", func() {
		p := Progress{}
		p.MachineSets.Total = 1
		p.Add(msDecision("a", bootimage.Error, bootimage.ReasonInvalidProviderSpec))
		progressing, degraded := ProgressConditions(1, p, nil)
		Expect(progressing).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Message", HavePrefix("Reconciled 0 of 1 MAPI MachineSets (0 skipped, 1 failed) | "))))
		Expect(degraded).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", HavePrefix(p.Counts()+" | 1 failed: "))))
	})

	It("is settled, not degraded, once every object is decided and none updates", func() {
		p := Progress{}
		p.MachineSets.Total = 1
		Expect(p.MachineSets.Pending()).To(BeTrue(), "an object not yet decided is pending")
		p.Add(msDecision("a", bootimage.NoChange, bootimage.ReasonUpToDate))
		progressing, degraded := ProgressConditions(1, p, nil)
		Expect(progressing).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", bootimage.ReasonAsExpected), HaveField("Message", p.Counts())))
		Expect(degraded).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Message", p.Counts())))
	})

	It("gives a pass only when the MachineSets are settled, with who was left behind and the oldest marketplace release", func() {
		p := Progress{}
		p.MachineSets.Total = 4
		p.Add(msDecision("b-custom", bootimage.Skip, bootimage.ReasonCustomImage))
		p.Add(msDecision("a-owned", bootimage.Skip, bootimage.ReasonOwnedByController))
		Expect(p.Pass("4.20.0")).To(BeNil(), "two MachineSets are not decided yet")
		for _, v := range []string{"9.6.20250701-0", "9.4.20240101-0"} {
			d := msDecision("m"+v, bootimage.NoChange, bootimage.ReasonUpToDate)
			d.Marketplace, d.BootImageVersion = true, v
			p.Add(d)
		}
		Expect(p.Pass("4.20.0")).To(Equal(&bootimage.SkewPass{LeftBehind: []string{"a-owned", "b-custom"}, ReleaseVersion: "4.20.0", RHCOSVersion: "9.4.20240101-0"}))
		Expect(p.LeftBehind()).To(Equal([]string{"a-owned", "b-custom"}))
	})

	It("says what is wrong with the selection", func() {
		Expect(ConfigurationCondition(3, nil)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("ObservedGeneration", int64(3))))
		Expect(ConfigurationCondition(3, []string{"a", "b"})).To(And(HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", bootimage.ReasonInvalidSelection), HaveField("Message", "a; b")))
	})
})

var _ = Describe("CountsHold", func() {
	var (
		clock *clocktesting.FakePassiveClock
		hold  *CountsHold
	)
	conditions := func(progressing metav1.ConditionStatus, counts, failed string) []metav1.Condition {
		var out []metav1.Condition
		meta.SetStatusCondition(&out, metav1.Condition{Type: ConditionBootImageUpdateProgressing, Status: progressing, Reason: "R", Message: counts})
		status := metav1.ConditionFalse
		if failed != "" {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&out, metav1.Condition{Type: ConditionBootImageUpdateDegraded, Status: status, Reason: "R", Message: counts + failed})
		return out
	}
	message := func(conds []metav1.Condition, t string) string { return meta.FindStatusCondition(conds, t).Message }

	BeforeEach(func() {
		clock = clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		hold = &CountsHold{Clock: clock}
	})

	It("holds the counts of a wave under way, and lets them through every countsRefresh", func() {
		written := conditions(metav1.ConditionTrue, "1 of 10", "")
		Expect(hold.Hold(nil, written)).To(BeZero(), "the wave starts: written")

		clock.SetTime(clock.Now().Add(10 * time.Second))
		want := conditions(metav1.ConditionTrue, "5 of 10", "")
		Expect(hold.Hold(written, want)).To(Equal(countsRefresh - 10*time.Second))
		Expect(message(want, ConditionBootImageUpdateProgressing)).To(Equal("1 of 10"))
		Expect(message(want, ConditionBootImageUpdateDegraded)).To(Equal("1 of 10"))

		clock.SetTime(clock.Now().Add(20 * time.Second))
		want = conditions(metav1.ConditionTrue, "8 of 10", "")
		Expect(hold.Hold(written, want)).To(BeZero(), "30 s after the last write the counts go through")
		Expect(message(want, ConditionBootImageUpdateProgressing)).To(Equal("8 of 10"))

		written = want
		clock.SetTime(clock.Now().Add(time.Second))
		want = conditions(metav1.ConditionTrue, "9 of 10", "")
		Expect(hold.Hold(written, want)).To(Equal(countsRefresh-time.Second), "the refresh restarted the hold")
	})

	It("lets the end of a wave through at once", func() {
		written := conditions(metav1.ConditionTrue, "1 of 10", "")
		hold.Hold(nil, written)
		clock.SetTime(clock.Now().Add(time.Second))
		want := conditions(metav1.ConditionFalse, "10 of 10", "")
		Expect(hold.Hold(written, want)).To(BeZero())
		Expect(message(want, ConditionBootImageUpdateProgressing)).To(Equal("10 of 10"))
	})

	It("lets a new failure through at once", func() {
		written := conditions(metav1.ConditionTrue, "1 of 10", "")
		hold.Hold(nil, written)
		clock.SetTime(clock.Now().Add(time.Second))
		want := conditions(metav1.ConditionTrue, "2 of 10", " | 1 failed: x")
		Expect(hold.Hold(written, want)).To(BeZero(), "Degraded changed")

		written = want
		clock.SetTime(clock.Now().Add(time.Second))
		want = conditions(metav1.ConditionTrue, "3 of 10", " | 2 failed: x; y")
		Expect(hold.Hold(written, want)).To(BeZero(), "what failed changed")
		Expect(message(want, ConditionBootImageUpdateDegraded)).To(Equal("3 of 10 | 2 failed: x; y"))
	})

	It("asks for nothing when the counts did not move", func() {
		written := conditions(metav1.ConditionTrue, "1 of 10", "")
		hold.Hold(nil, written)
		Expect(hold.Hold(written, conditions(metav1.ConditionTrue, "1 of 10", ""))).To(BeZero())
	})
})

var _ = Describe("Progress with Cluster API objects", func() {
	It("counts them for skew like MachineSets, and leaves out those another API is in charge of", func() {
		var p Progress
		p.MachineSets.Total, p.ClusterAPI.Total = 1, 3
		p.Add(bootimage.Decision{Kind: bootimage.KindMachineSet, Name: "worker-a", Action: bootimage.Skip, Reason: bootimage.ReasonAuthorityClusterAPI})
		p.Add(bootimage.Decision{Kind: bootimage.KindMachineSet, APIGroup: "cluster.x-k8s.io", Name: "worker-a", Action: bootimage.NoChange})
		p.Add(bootimage.Decision{Kind: bootimage.KindMachineDeployment, APIGroup: "cluster.x-k8s.io", Name: "workers", Action: bootimage.Skip, Reason: bootimage.ReasonCustomImage})
		Expect(p.Pass("4.20.3")).To(BeNil(), "one Cluster API object is not decided yet")
		p.Add(bootimage.Decision{Kind: bootimage.KindMachineSet, APIGroup: "cluster.x-k8s.io", Name: "worker-b", Action: bootimage.Error, Reason: bootimage.ReasonInvalidTemplate})
		pass := p.Pass("4.20.3")
		Expect(pass).NotTo(BeNil())
		Expect(pass.LeftBehind).To(Equal([]string{"MachineDeployment.cluster.x-k8s.io/workers"}))
		Expect(pass.Errors).To(Equal(1))
		Expect(p.Counts()).To(HaveSuffix("| Reconciled 2 of 3 CAPI MachineSets and MachineDeployments (1 skipped, 1 failed)"))
	})
})
