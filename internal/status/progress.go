package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// MaxErrorsInMessage bounds the lists in condition messages on clusters with many broken objects.
const MaxErrorsInMessage = 5

// countsRefresh is how often the counts of a long wave are rewritten while Progressing stays True:
// the status is written when Progressing or Degraded change, not for every object done.
const countsRefresh = 30 * time.Second

// Progress is the tally of the current decisions, per resource.
type Progress struct {
	MachineSets, ControlPlaneMachineSets Tally
	// ClusterAPI counts Cluster API MachineSets and MachineDeployments together.
	ClusterAPI Tally
	errs       []string
	leftBehind []string
	// clusterLevel are the reasons of errors of the cluster's inputs some object is held by.
	clusterLevel map[string]bool
	// marketplaceRHCOS is the oldest RHCOS release chosen for a marketplace MachineSet.
	marketplaceRHCOS string
	// copyRefusals counts the objects whose AMI copy was refused; copyRefusal is the first of
	// their messages in sort order, so the status says the same on every pass.
	copyRefusals int
	copyRefusal  string
	// held are the objects restored to their previous boot image and held there.
	held []string
}

// CopyRefusal says, once for the cluster, that AMI copies were refused: how many objects are held
// on their old copy, and one refusal's message (which names the missing action and the
// CredentialsRequest); "" when none was.
func (p Progress) CopyRefusal() string {
	if p.copyRefusals == 0 {
		return ""
	}
	return fmt.Sprintf("%d object(s) kept on an outdated AMI copy: %s", p.copyRefusals, p.copyRefusal)
}

// Tally counts the objects of one resource by their current decision. Total is every object
// listed; Decided those with a decision taken on the current inputs.
type Tally struct{ Total, Decided, Reconciled, Skipped, Updating, Errored int }

// Pending reports whether an object of the resource is being updated or not yet decided on the
// current inputs.
func (t Tally) Pending() bool { return t.Updating > 0 || t.Decided < t.Total }

// Add counts d, a current decision, under its resource.
func (p *Progress) Add(d bootimage.Decision) {
	t := &p.MachineSets
	switch {
	case d.Kind == bootimage.KindControlPlaneMachineSet:
		t = &p.ControlPlaneMachineSets
	case d.APIGroup == string(bootimage.ClusterAPIGroup):
		t = &p.ClusterAPI
	}
	t.Decided++
	if d.Kind != bootimage.KindControlPlaneMachineSet && d.Marketplace && d.BootImageVersion != "" && (d.Action == bootimage.NoChange || d.Action == bootimage.Update) {
		if p.marketplaceRHCOS == "" || bootimage.CompareRHCOSVersions(d.BootImageVersion, p.marketplaceRHCOS) < 0 {
			p.marketplaceRHCOS = d.BootImageVersion
		}
	}
	switch d.Action {
	case bootimage.NoChange:
		t.Reconciled++
	case bootimage.Skip:
		t.Reconciled++
		t.Skipped++
		if d.LeftBehind() && d.Kind != bootimage.KindControlPlaneMachineSet {
			p.leftBehind = append(p.leftBehind, leftBehindName(d))
		}
		if d.Reason == bootimage.ReasonBootImageHeld {
			p.held = append(p.held, fmt.Sprintf("%s %s/%s: %s", d.Kind, d.Namespace, d.Name, d.Message))
		}
		if d.Reason == bootimage.ReasonCopyNotPermitted {
			p.copyRefusals++
			if p.copyRefusal == "" || d.Message < p.copyRefusal {
				p.copyRefusal = d.Message
			}
		}
	case bootimage.Update:
		t.Updating++
	case bootimage.Error:
		t.Errored++
		if d.ClusterLevel() { // said once, among the cluster's warnings
			if p.clusterLevel == nil {
				p.clusterLevel = map[string]bool{}
			}
			p.clusterLevel[d.Reason] = true
		} else {
			p.errs = append(p.errs, fmt.Sprintf("%s %s/%s: %s: %s", d.Kind, d.Namespace, d.Name, d.Reason, d.Message))
		}
	}
}

// HeldByCluster reports whether some object is in bootimage.Error for reason, an error of the cluster's
// inputs (bootimage.Decision.ClusterLevel), which the cluster's warnings say once instead.
func (p Progress) HeldByCluster(reason string) bool { return p.clusterLevel[reason] }

// leftBehindName names d's object in the skew guard's list: a Machine API MachineSet by its name,
// a Cluster API object by kind.group/name.
func leftBehindName(d bootimage.Decision) string {
	if d.APIGroup == "" {
		return d.Name
	}
	return fmt.Sprintf("%s.%s/%s", d.Kind, d.APIGroup, d.Name)
}

// LeftBehind names, sorted, the selected MachineSets (and Cluster API MachineDeployments) the
// operator cannot update by itself.
func (p Progress) LeftBehind() []string {
	out := append([]string(nil), p.leftBehind...)
	sort.Strings(out)
	return out
}

// Pass returns what the finished pass over the MachineSets, Machine API and Cluster API, and the
// MachineDeployments achieved, nil while one is under way. releaseVersion is coreos-bootimages'
// releaseVersion, "" when the ConfigMap is missing.
func (p Progress) Pass(releaseVersion string) *bootimage.SkewPass {
	if p.MachineSets.Pending() || p.ClusterAPI.Pending() {
		return nil
	}
	return &bootimage.SkewPass{LeftBehind: p.LeftBehind(), Errors: p.MachineSets.Errored + p.ClusterAPI.Errored, RHCOSVersion: p.marketplaceRHCOS, ReleaseVersion: releaseVersion}
}

// Counts is the MCO's progress message, with the failed objects counted: of Total, Reconciled
// (up to date or skipped) and failed are done, and the rest is being updated or not yet decided.
func (p Progress) Counts() string {
	counts := p.MachineSets.counts("MAPI MachineSets") + " | " + p.ControlPlaneMachineSets.counts("ControlPlaneMachineSets")
	if capi := p.ClusterAPI; capi.Total > 0 || capi.Decided > 0 {
		counts += " | " + capi.counts("CAPI MachineSets and MachineDeployments")
	}
	return counts
}

func (t Tally) counts(resource string) string {
	failed := ""
	if t.Errored > 0 {
		failed = fmt.Sprintf(", %d failed", t.Errored)
	}
	return fmt.Sprintf("Reconciled %d of %d %s (%d skipped%s)", t.Reconciled, t.Total, resource, t.Skipped, failed)
}

// ProgressConditions returns Progressing (True while any resource has an object pending) and
// Degraded (True while an object is in bootimage.Error or a cluster-wide warning says the inputs are wrong),
// with the MCO's counts in their messages, for a MachineConfiguration of generation.
func ProgressConditions(generation int64, p Progress, warnings []string) (progressing, degraded metav1.Condition) {
	counts := p.Counts()
	progressing = metav1.Condition{Type: ConditionBootImageUpdateProgressing, Status: metav1.ConditionFalse, Reason: bootimage.ReasonAsExpected, Message: counts, ObservedGeneration: generation}
	if p.MachineSets.Pending() || p.ControlPlaneMachineSets.Pending() || p.ClusterAPI.Pending() {
		progressing.Status, progressing.Reason = metav1.ConditionTrue, bootimage.ReasonBootImageUpdating
	}
	degraded = metav1.Condition{Type: ConditionBootImageUpdateDegraded, Status: metav1.ConditionFalse, Reason: bootimage.ReasonAsExpected, Message: counts, ObservedGeneration: generation}
	errs := append([]string(nil), p.errs...)
	sort.Strings(errs)
	var parts []string
	if len(errs) > 0 {
		parts = append(parts, fmt.Sprintf("%d failed: %s", len(errs), strings.Join(errs[:min(len(errs), MaxErrorsInMessage)], "; ")))
	}
	held := append([]string(nil), p.held...)
	sort.Strings(held)
	if len(held) > 0 {
		parts = append(parts, fmt.Sprintf("%d restored to the previous boot image and held: %s", len(held), strings.Join(held[:min(len(held), MaxErrorsInMessage)], "; ")))
	}
	parts = append(parts, warnings...)
	if len(parts) > 0 {
		degraded.Status, degraded.Reason = metav1.ConditionTrue, bootimage.ReasonBootImageUpdateFailed
		if len(errs) == 0 && len(held) > 0 {
			degraded.Reason = bootimage.ReasonBootImageRestored
		}
		degraded.Message = counts + " | " + strings.Join(parts, " | ")
	}
	return progressing, degraded
}

// KeepDegraded returns want, or the Degraded condition already written (current) while that one
// is True, want is not, and an object is not yet decided: after a restart the object in error may
// simply not be decided again yet, and a Degraded that drops and comes back would tell the
// ClusterOperator something untrue twice.
func KeepDegraded(current []metav1.Condition, want metav1.Condition, p Progress) metav1.Condition {
	old := meta.FindStatusCondition(current, ConditionBootImageUpdateDegraded)
	if old == nil || old.Status != metav1.ConditionTrue || want.Status == metav1.ConditionTrue || !p.undecided() {
		return want
	}
	kept := *old
	kept.ObservedGeneration = want.ObservedGeneration
	return kept
}

// undecided reports whether an object of any resource has no decision yet.
func (p Progress) undecided() bool {
	for _, t := range []Tally{p.MachineSets, p.ControlPlaneMachineSets, p.ClusterAPI} {
		if t.Decided < t.Total {
			return true
		}
	}
	return false
}

// ConfigurationCondition returns BootImageConfigurationDegraded for the problems
// EffectiveConfiguration found in spec.managedBootImages.
func ConfigurationCondition(generation int64, problems []string) metav1.Condition {
	cond := metav1.Condition{Type: ConditionConfigurationDegraded, Status: metav1.ConditionFalse, Reason: bootimage.ReasonAsExpected, Message: "spec.managedBootImages is valid", ObservedGeneration: generation}
	if len(problems) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, bootimage.ReasonInvalidSelection, strings.Join(problems, "; ")
	}
	return cond
}

// CountsHold keeps the counts last written while a wave goes on, so a wave of N updates costs a
// write when it starts and one when it ends, not one per object; on long waves the counts are
// refreshed every countsRefresh. Use one per status writer.
type CountsHold struct {
	// Clock tells the time; nil is the real clock.
	Clock clock.PassiveClock
	// written is when the counts were last let through.
	written time.Time
}

// Hold compares the Progressing and Degraded conditions of want with current's, the ones written.
// While both say the same but for the counts, it puts current's messages back into want and
// returns when the counts are due to be written; otherwise it lets want through and returns 0.
func (h *CountsHold) Hold(current, want []metav1.Condition) time.Duration {
	now := h.now()
	oldP := meta.FindStatusCondition(current, ConditionBootImageUpdateProgressing)
	oldD := meta.FindStatusCondition(current, ConditionBootImageUpdateDegraded)
	newP := meta.FindStatusCondition(want, ConditionBootImageUpdateProgressing)
	newD := meta.FindStatusCondition(want, ConditionBootImageUpdateDegraded)
	if oldP == nil || oldD == nil || newP == nil || newD == nil ||
		oldP.Status != metav1.ConditionTrue || newP.Status != metav1.ConditionTrue || oldD.Status != newD.Status {
		h.written = now
		return 0
	}
	// Degraded's message is the counts and what failed: hold the counts only while what failed
	// is the same.
	if strings.TrimPrefix(oldD.Message, oldP.Message) != strings.TrimPrefix(newD.Message, newP.Message) {
		h.written = now
		return 0
	}
	if newP.Message == oldP.Message {
		return 0
	}
	if wait := countsRefresh - now.Sub(h.written); wait > 0 {
		newP.Message, newD.Message = oldP.Message, oldD.Message
		return wait
	}
	h.written = now
	return 0
}

func (h *CountsHold) now() time.Time {
	if h.Clock == nil {
		return time.Now()
	}
	return h.Clock.Now()
}
