package controllers

import (
	"sync"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Tracker keeps the latest decision per object, shared by the reconcilers that decide and the one
// that reports. It also remembers patch attempts, so a hot loop is caught even when whoever
// reverts our change removes the attempts annotation too.
type Tracker struct {
	mu        sync.Mutex
	decisions map[trackerKey]bootimage.Decision
	attempts  map[trackerKey]bootimage.Attempts
	// Changed receives an event whenever a decision changes; the status reconciler watches it.
	Changed chan event.GenericEvent
}

type trackerKey struct {
	kind string
	name types.NamespacedName
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{
		decisions: map[trackerKey]bootimage.Decision{},
		attempts:  map[trackerKey]bootimage.Attempts{},
		Changed:   make(chan event.GenericEvent, 1),
	}
}

func keyOf(d bootimage.Decision) trackerKey {
	return trackerKey{d.Kind, types.NamespacedName{Namespace: d.Namespace, Name: d.Name}}
}

// Record stores d and reports whether it differs from the previous decision for the object in
// action, reason or message (what an Event would say).
func (t *Tracker) Record(d bootimage.Decision) bool {
	t.mu.Lock()
	prev, seen := t.decisions[keyOf(d)]
	t.decisions[keyOf(d)] = d
	t.mu.Unlock()
	changed := !seen || prev.Action != d.Action || prev.Reason != d.Reason || prev.Message != d.Message
	if changed {
		t.poke()
	}
	return changed
}

// Forget drops the object of kind.
func (t *Tracker) Forget(kind string, name types.NamespacedName) {
	t.mu.Lock()
	_, seen := t.decisions[trackerKey{kind, name}]
	delete(t.decisions, trackerKey{kind, name})
	delete(t.attempts, trackerKey{kind, name})
	t.mu.Unlock()
	if seen {
		t.poke()
	}
}

// Decisions returns the decisions of kind.
func (t *Tracker) Decisions(kind string) map[types.NamespacedName]bootimage.Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[types.NamespacedName]bootimage.Decision{}
	for k, d := range t.decisions {
		if k.kind == kind {
			out[k.name] = d
		}
	}
	return out
}

// Attempts returns the attempts remembered for an object, combined with persisted ones: the
// larger count for the same target and generation wins.
func (t *Tracker) Attempts(kind string, name types.NamespacedName, persisted bootimage.Attempts, generation int64) func(string) int {
	t.mu.Lock()
	mem := t.attempts[trackerKey{kind, name}]
	t.mu.Unlock()
	return func(target string) int { return max(mem.For(target, generation), persisted.For(target, generation)) }
}

// Patched remembers one more patch of an object to a target and returns the new attempts.
func (t *Tracker) Patched(kind string, name types.NamespacedName, persisted bootimage.Attempts, target string, generation int64) bootimage.Attempts {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := trackerKey{kind, name}
	count := max(t.attempts[k].For(target, generation), persisted.For(target, generation))
	next := bootimage.Attempts{Target: target, Count: count + 1, Generation: generation}
	t.attempts[k] = next
	return next
}

func (t *Tracker) poke() {
	select {
	case t.Changed <- event.GenericEvent{Object: &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: MachineConfigurationName}}}:
	default: // a report is already pending; it will read the latest decisions
	}
}
