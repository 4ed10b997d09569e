package controllers

import (
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/bootimage-operator/bootimage-operator/bootimage"

	"github.com/bootimage-operator/bootimage-operator/kube"
)

// Tracker keeps the latest decision per object, shared by the reconcilers that decide and the one
// that reports. It also remembers patch attempts, so a hot loop is caught even when whoever
// reverts our change removes the attempts annotation too, and when cloud lookups began failing.
type Tracker struct {
	mu        sync.Mutex
	decisions map[trackerKey]trackedDecision
	attempts  map[trackerKey]bootimage.Attempts
	// optedOut marks objects seen not selected since their last patch: their persisted attempts
	// no longer count, so opting out and back in resumes updates, as the hot-loop message promises.
	optedOut     map[trackerKey]bool
	cloudFailing map[trackerKey]time.Time
	// Changed receives an event whenever a decision changes; the status reconciler watches it.
	Changed chan event.GenericEvent
}

type trackerKey struct {
	kind string
	name types.NamespacedName
}

// trackedDecision is a decision and the version of the inputs it was taken on (inputsVersion).
type trackedDecision struct {
	bootimage.Decision
	inputs string
	// cause identifies the fault of an Error (cloud.FailureKey); empty for other decisions.
	cause string
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{
		decisions:    map[trackerKey]trackedDecision{},
		attempts:     map[trackerKey]bootimage.Attempts{},
		optedOut:     map[trackerKey]bool{},
		cloudFailing: map[trackerKey]time.Time{},
		Changed:      make(chan event.GenericEvent, 1),
	}
}

func keyOf(d bootimage.Decision) trackerKey {
	return trackerKey{d.Kind, types.NamespacedName{Namespace: d.Namespace, Name: d.Name}}
}

// Record stores d, taken on inputs, and reports whether it differs from the previous decision for
// the object in action, reason or message (what an Event would say).
func (t *Tracker) Record(d bootimage.Decision, inputs string) bool {
	return t.RecordFailure(d, inputs, "")
}

// RecordFailure is Record for an Error caused by the fault cause: while the fault stays the
// same (same reason and cause), the decision is unchanged and keeps its first message, so a
// retry that fails alike costs no Event, no status write and no error count.
func (t *Tracker) RecordFailure(d bootimage.Decision, inputs, cause string) bool {
	k := keyOf(d)
	t.mu.Lock()
	prev, seen := t.decisions[k]
	sameFault := seen && cause != "" && prev.cause == cause && prev.Action == d.Action && prev.Reason == d.Reason
	if sameFault {
		d.Message = prev.Message
	}
	t.decisions[k] = trackedDecision{d, inputs, cause}
	if d.Reason == bootimage.ReasonNotSelected {
		delete(t.attempts, k)
		t.optedOut[k] = true
	}
	t.mu.Unlock()
	changed := !sameFault && (!seen || prev.Action != d.Action || prev.Reason != d.Reason || prev.Message != d.Message)
	if changed || prev.inputs != inputs {
		t.poke()
	}
	return changed
}

// Forget drops the object of kind.
func (t *Tracker) Forget(kind string, name types.NamespacedName) {
	k := trackerKey{kind, name}
	t.mu.Lock()
	_, seen := t.decisions[k]
	delete(t.decisions, k)
	delete(t.attempts, k)
	delete(t.optedOut, k)
	delete(t.cloudFailing, k)
	t.mu.Unlock()
	if seen {
		t.poke()
	}
}

// Decisions returns the decisions of kind taken on inputs; decisions taken on other inputs are
// not current and are left out.
func (t *Tracker) Decisions(kind, inputs string) map[types.NamespacedName]bootimage.Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[types.NamespacedName]bootimage.Decision{}
	for k, d := range t.decisions {
		if k.kind == kind && d.inputs == inputs {
			out[k.name] = d.Decision
		}
	}
	return out
}

// Latest returns the latest decision of each object of kind, whatever inputs it was taken on.
func (t *Tracker) Latest(kind string) []bootimage.Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []bootimage.Decision
	for k, d := range t.decisions {
		if k.kind == kind {
			out = append(out, d.Decision)
		}
	}
	return out
}

// Attempts returns the attempts remembered for an object, combined with persisted ones: the
// larger count for the same target and selection wins. Persisted attempts do not count for an
// object seen opted out since.
func (t *Tracker) Attempts(kind string, name types.NamespacedName, persisted bootimage.Attempts, selection string) func(string) int {
	t.mu.Lock()
	k := trackerKey{kind, name}
	mem := t.attempts[k]
	if t.optedOut[k] {
		persisted = bootimage.Attempts{}
	}
	t.mu.Unlock()
	return func(target string) int { return max(mem.For(target, selection), persisted.For(target, selection)) }
}

// Patched remembers one more patch of an object to a target and returns the new attempts.
func (t *Tracker) Patched(kind string, name types.NamespacedName, next bootimage.Attempts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := trackerKey{kind, name}
	t.attempts[k] = next
	delete(t.optedOut, k)
}

// NextAttempts returns the attempts to record with the next patch of an object to target.
func (t *Tracker) NextAttempts(kind string, name types.NamespacedName, persisted bootimage.Attempts, target, selection string) bootimage.Attempts {
	count := t.Attempts(kind, name, persisted, selection)(target)
	return bootimage.Attempts{Target: target, Count: count + 1, Selection: selection}
}

// CloudFailing records that a cloud lookup for an object failed now and returns how long its
// lookups have been failing.
func (t *Tracker) CloudFailing(kind string, name types.NamespacedName, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := trackerKey{kind, name}
	since, ok := t.cloudFailing[k]
	if !ok {
		t.cloudFailing[k] = now
		return 0
	}
	return now.Sub(since)
}

// CloudWorks records that the cloud lookups of an object work.
func (t *Tracker) CloudWorks(kind string, name types.NamespacedName) {
	t.mu.Lock()
	delete(t.cloudFailing, trackerKey{kind, name})
	t.mu.Unlock()
}

func (t *Tracker) poke() {
	select {
	case t.Changed <- event.GenericEvent{Object: &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kube.MachineConfigurationName}}}:
	default: // a report is already pending; it will read the latest decisions
	}
}
