package status

import (
	"context"
	"fmt"
	"strings"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// A second writer rewrites what this operator owns: the MCO's status sync writing the whole status
// from its own copy (UpdateStatus), or the MCO's boot image controller still running. The
// operator reports it and backs off instead of fighting: while one is seen, its status writes are
// limited to DefaultContestedWrites per DefaultContestInterval.
const (
	DefaultContestInterval = time.Hour
	DefaultContestedWrites = 3
)

// secondWriterHint is what an admin should look at first.
const secondWriterHint = "is the MCO's own boot image controller still enabled, or its status sync still writing these fields?"

// statusContest is the back-off of the status writer.
type statusContest struct {
	interval time.Duration
	budget   int
	// computed is the status computed for the last write that landed, before any contest report;
	// written is what the API server stored then: the full status, or the fallback of a rejected one.
	computed, written *operatorv1.MachineConfiguration
	// lastRevert is when a second writer was last seen; zero when none is.
	lastRevert  time.Time
	windowStart time.Time
	writes      int
	announced   string
}

// withDefaults sets the interval and budget, once: the defaults, the embedder's budget, and the
// interval a spec's seams may shorten.
func (c *statusContest) withDefaults(hooks seams.Hooks, budget int) {
	if c.interval != 0 {
		return
	}
	c.interval, c.budget = DefaultContestInterval, DefaultContestedWrites
	if budget > 0 {
		c.budget = budget
	}
	if hooks.ContestInterval != 0 {
		c.interval = hooks.ContestInterval
	}
}

// active reports whether a second writer was seen within the last interval.
func (c *statusContest) active(now time.Time) bool {
	return !c.lastRevert.IsZero() && now.Sub(c.lastRevert) < c.interval
}

// landed records a write the API server took; applied is its answer, nil when nothing was sent.
func (c *statusContest) landed(computed, applied *operatorv1.MachineConfiguration) {
	if applied != nil {
		c.computed, c.written = computed, applied
	}
}

// reverted reports whether current lost what this operator wrote although want is what it wrote
// then: someone else rewrote it.
func (c *statusContest) reverted(current, want *operatorv1.MachineConfiguration, withSkew bool) bool {
	return c.computed != nil && ownedStatusEqual(withoutTransitions(c.computed), withoutTransitions(want), withSkew) &&
		!ownedStatusEqual(withoutTransitions(current), withoutTransitions(c.written), withSkew)
}

// allow reports whether a status write may go now, counting it, and otherwise when to retry.
func (c *statusContest) allow(now time.Time) (bool, time.Duration) {
	if !c.active(now) {
		c.writes = 0
		return true, 0
	}
	if c.windowStart.IsZero() || now.Sub(c.windowStart) >= c.interval {
		c.windowStart, c.writes = now, 0
	}
	if c.writes >= c.budget {
		return false, c.windowStart.Add(c.interval).Sub(now)
	}
	c.writes++
	return true, 0
}

func withoutTransitions(mc *operatorv1.MachineConfiguration) *operatorv1.MachineConfiguration {
	out := mc.DeepCopy()
	for i := range out.Status.Conditions {
		out.Status.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return out
}

// changedField names the first owned status field where live differs from want.
func changedField(live, want *operatorv1.MachineConfiguration, withSkew bool) string {
	switch {
	case !equality.Semantic.DeepEqual(live.Status.ManagedBootImagesStatus, want.Status.ManagedBootImagesStatus):
		return "status.managedBootImagesStatus"
	case withSkew && !equality.Semantic.DeepEqual(live.Status.BootImageSkewEnforcementStatus, want.Status.BootImageSkewEnforcementStatus):
		return "status.bootImageSkewEnforcementStatus"
	case live.Status.ObservedGeneration != want.Status.ObservedGeneration:
		return "status.observedGeneration"
	}
	for _, t := range ownedConditions {
		a, b := meta.FindStatusCondition(live.Status.Conditions, t), meta.FindStatusCondition(want.Status.Conditions, t)
		if (a == nil) != (b == nil) || (a != nil && (a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message)) {
			return "status.conditions[" + t + "]"
		}
	}
	return "status"
}

// lastOtherWriter returns the field manager other than this operator's that last wrote obj (or its
// subresource) with an Update, or whose fields mention field; "" when none.
func lastOtherWriter(obj metav1.Object, subresource, field string) string {
	var name string
	var at time.Time
	for _, e := range obj.GetManagedFields() {
		if e.Manager == FieldManager || e.Subresource != subresource || e.Operation != metav1.ManagedFieldsOperationUpdate {
			continue
		}
		if field != "" && (e.FieldsV1 == nil || !strings.Contains(e.FieldsV1.GetRawString(), field)) {
			continue
		}
		if t := e.Time; name == "" || (t != nil && t.After(at)) {
			name = e.Manager
			if t != nil {
				at = t.Time
			}
		}
	}
	return name
}

// checkStatusContest runs before a status write. It detects a second writer (the cached object
// lost what this operator wrote, and the API server confirms it), then reports it once (log,
// Warning Event) and on the Degraded condition of want, and says whether the write may go now.
func (w *Writer) checkStatusContest(ctx context.Context, current, want *operatorv1.MachineConfiguration, withSkew bool) (bool, time.Duration, error) {
	w.contest.withDefaults(seams.From(ctx), w.ContestedWrites)
	now := w.Clock.Now()
	if w.contest.reverted(current, want, withSkew) {
		live := &operatorv1.MachineConfiguration{}
		if err := w.Reader.Get(ctx, client.ObjectKeyFromObject(current), live); err != nil {
			return false, 0, err
		}
		if ownedStatusEqual(withoutTransitions(live), withoutTransitions(w.contest.written), withSkew) {
			// The cache lags behind the last write: nothing to do.
			return false, 0, nil
		}
		w.contest.lastRevert = now
		field := changedField(live, want, withSkew)
		manager := lastOtherWriter(live, "status", "")
		if manager == "" {
			manager = "unknown"
		}
		msg := fmt.Sprintf("%s of MachineConfiguration/%s was rewritten by field manager %q after this operator wrote it: %s This operator now rewrites its status at most %d times per %s",
			field, current.Name, manager, secondWriterHint, w.contest.budget, w.contest.interval)
		if key := manager + "/" + field; key != w.contest.announced {
			w.contest.announced = key
			logf.FromContext(ctx).Info("Another writer rewrites this operator's status", "machineConfiguration", current.Name, "fieldManager", manager, "field", field)
			w.Recorder.Event(current, corev1.EventTypeWarning, ReasonSecondWriter, msg)
		}
		w.contestMessage = msg
	}
	if !w.contest.active(now) {
		w.contestMessage = ""
	}
	if w.contestMessage != "" {
		markSecondWriter(want, w.contestMessage)
	}
	if ownedStatusEqual(current, want, withSkew) {
		return true, 0, nil // nothing to write
	}
	ok, wait := w.contest.allow(now)
	return ok, wait, nil
}

// markSecondWriter makes want's Degraded condition say that a second writer is seen.
func markSecondWriter(want *operatorv1.MachineConfiguration, msg string) {
	d := meta.FindStatusCondition(want.Status.Conditions, ConditionBootImageUpdateDegraded)
	if d == nil {
		return
	}
	d.Status, d.Reason = metav1.ConditionTrue, ReasonSecondWriter
	d.Message = msg + " | " + d.Message
}

// WithSecondWriter adds, to a hot-loop message, who keeps reverting the object when its managed
// fields say so.
func WithSecondWriter(ctx context.Context, reader client.Reader, live client.Object, msg string) string {
	fresh := live.DeepCopyObject().(client.Object)
	if err := reader.Get(ctx, client.ObjectKeyFromObject(live), fresh); err != nil {
		return msg
	}
	field, path := bootImageField(fresh)
	manager := lastOtherWriter(fresh, "", field)
	if manager == "" {
		return msg
	}
	return fmt.Sprintf("%s (%s was last written by field manager %q: is the MCO's own boot image controller still enabled?)", msg, path, manager)
}

// bootImageField is the managed-fields key of the field obj's boot image updates write, and its
// path: a Cluster API object's template reference, a Machine API object's providerSpec.
func bootImageField(obj client.Object) (field, path string) {
	if obj.GetObjectKind().GroupVersionKind().Group == "cluster.x-k8s.io" {
		return "f:infrastructureRef", "spec.template.spec.infrastructureRef.name"
	}
	return "f:providerSpec", "spec.template.spec.providerSpec.value"
}
