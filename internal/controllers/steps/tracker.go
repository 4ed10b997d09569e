package steps

import (
	"sync"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// Tracker keeps the latest decision per object, shared by the reconcilers that decide and the one
// that reports, and each object's memory (patch attempts, cloud failure clocks, a refused update).
type Tracker struct {
	mu        sync.Mutex
	decisions map[trackerKey]trackedDecision
	memory    map[trackerKey]memory
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
		decisions: map[trackerKey]trackedDecision{},
		memory:    map[trackerKey]memory{},
		Changed:   make(chan event.GenericEvent, 1),
	}
}

func keyOf(d bootimage.Decision) trackerKey {
	return trackerKey{d.Kind, types.NamespacedName{Namespace: d.Namespace, Name: d.Name}}
}

// Record stores d, taken on inputs, and reports whether it differs from the previous decision for
// the object in action, reason or message (what an Event would say).
func (t *Tracker) Record(d bootimage.Decision, inputs string) bool {
	changed, _ := t.RecordFailure(d, inputs, "")
	return changed
}

// RecordFailure is Record for an Error caused by the fault cause: while the fault stays the
// same (same reason and cause), the decision is unchanged and keeps its first message, so a
// retry that fails alike costs no Event, no status write and no error count. noteChanged says
// whether d's StreamNote is new.
func (t *Tracker) RecordFailure(d bootimage.Decision, inputs, cause string) (changed, noteChanged bool) {
	k := keyOf(d)
	t.mu.Lock()
	prev, seen := t.decisions[k]
	sameFault := seen && cause != "" && prev.cause == cause && prev.Action == d.Action && prev.Reason == d.Reason
	if sameFault {
		d.Message = prev.Message
	}
	t.decisions[k] = trackedDecision{d, inputs, cause}
	t.mu.Unlock()
	noteChanged = prev.StreamNote != d.StreamNote
	changed = !sameFault && (!seen || prev.Action != d.Action || prev.Reason != d.Reason || prev.Message != d.Message)
	if changed || prev.inputs != inputs {
		t.poke()
	}
	return changed, noteChanged
}

// Forget drops the object of kind.
func (t *Tracker) Forget(kind string, name types.NamespacedName) {
	k := trackerKey{kind, name}
	t.mu.Lock()
	_, seen := t.decisions[k]
	delete(t.decisions, k)
	delete(t.memory, k)
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

// Memory returns what is remembered of an object; zero for one not seen yet.
func (t *Tracker) Memory(kind string, name types.NamespacedName) memory {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.memory[trackerKey{kind, name}]
}

// Remember stores m for an object. An object is reconciled by one worker at a time, so what it
// read with Memory is still current when it stores.
func (t *Tracker) Remember(kind string, name types.NamespacedName, m memory) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m == (memory{}) {
		delete(t.memory, trackerKey{kind, name})
		return
	}
	t.memory[trackerKey{kind, name}] = m
}

func (t *Tracker) poke() {
	select {
	case t.Changed <- event.GenericEvent{Object: &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kube.MachineConfigurationName}}}:
	default: // a report is already pending; it will read the latest decisions
	}
}
