package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
)

// Events of boot image verification.
const (
	ReasonBootImageVerified = "BootImageVerified"
	ReasonBootImageRestored = bootimage.ReasonBootImageRestored
)

// VerifySubject is a Machine API object whose newest boot image change its machines verify.
type VerifySubject struct {
	Live client.Object
	Obj  bootimage.Object
	// machines selects the object's machines in its namespace.
	machines labels.Selector
	// prefix is where the providerSpec sits, for JSON Patch.
	prefix string
	// prove, when set, checks a restore patch before it is sent (the CPMS's image-only proof).
	prove    func(patch []byte) error
	Platform configv1.PlatformType
}

// Verification is what the verify step found: the state of the newest change, and when to look
// again with no event.
type Verification struct {
	State   string
	recheck time.Duration
	// wrote is true when the step patched the object: the reconcile ends, the patch's event
	// brings it back.
	Wrote bool
}

// Verify reads the machines created since the object's newest change for evidence, records a
// verdict, and restores the object on evidence against its image (see bootimage.Verify).
func (s BootImages) Verify(ctx context.Context, in LoadedInputs, sub VerifySubject) (Verification, error) {
	h, v, pending := s.Pending(ctx, in, sub.Obj)
	if !pending {
		return v, nil
	}
	sub.Platform = in.Cluster.Platform
	machines := &machinev1beta1.MachineList{}
	if err := s.Client.List(ctx, machines, client.InNamespace(sub.Obj.Namespace), client.MatchingLabelsSelector{Selector: sub.machines}, client.UnsafeDisableDeepCopy); err != nil {
		return Verification{}, err
	}
	return s.Judge(ctx, in, sub, h, machineEvidence(in.Cluster.Platform, machines.Items))
}

// Pending reads obj's history; pending is true when its newest change is the operator's, not yet
// verified or failed, and verification is on. Otherwise v is the state to report.
func (s BootImages) Pending(ctx context.Context, in LoadedInputs, obj bootimage.Object) (h bootimage.History, v Verification, pending bool) {
	h, err := bootimage.HistoryOf(obj.Annotations)
	if err != nil {
		logf.FromContext(ctx).Error(err, "Cannot read the boot image history; the next update starts a new one")
		return nil, Verification{}, false
	}
	c, ok := h.Newest()
	if !ok || !in.Cluster.Verification.Enabled || c.By != bootimage.ByOperator {
		return h, Verification{State: stateOf(h, in.Cluster.Verification.Enabled)}, false
	}
	if c.Outcome != "" {
		return h, Verification{State: c.State()}, false
	}
	return h, Verification{}, true
}

// Judge reads machines, the object's, for evidence about the newest change of h: a verdict is
// recorded, evidence against the image restores the object, and nothing yet says when to look
// again.
func (s BootImages) Judge(ctx context.Context, in LoadedInputs, sub VerifySubject, h bootimage.History, machines []bootimage.Machine) (Verification, error) {
	c, _ := h.Newest()
	now := s.Clock.Now()
	v := bootimage.Verify(c, machines, MachineImageFailure(in.Cluster.Platform), in.Cluster.Verification.Deadline, now)
	switch v.Outcome {
	case bootimage.Verified:
		c.Outcome, c.Machine = bootimage.Verified, v.Machine
		return Verification{State: bootimage.Verified, Wrote: true}, s.recordVerified(ctx, sub, h.WithNewest(c))
	case bootimage.Failed:
		return Verification{State: bootimage.Failed, Wrote: true}, s.restore(ctx, sub, h, v, now)
	}
	var recheck time.Duration
	if !v.Recheck.IsZero() {
		recheck = max(v.Recheck.Sub(now), time.Second)
	}
	return Verification{State: bootimage.Pending, recheck: recheck}, nil
}

// stateOf is Decision.Verification for history h: the state of the newest change the operator
// made (a restore is not itself verified); "" while verification is off.
func stateOf(h bootimage.History, enabled bool) string {
	for i := len(h) - 1; enabled && i >= 0; i-- {
		if h[i].By == bootimage.ByOperator {
			return h[i].State()
		}
	}
	return ""
}

// recordVerified stores h, whose newest change a machine verified, with optimistic locking.
func (s BootImages) recordVerified(ctx context.Context, sub VerifySubject, h bootimage.History) error {
	c, _ := h.Newest()
	if err := s.recordOutcome(ctx, sub, h); err != nil {
		return fmt.Errorf("recording the Verified boot image of %s %s: %w", sub.Obj.Kind, client.ObjectKeyFromObject(sub.Live), err)
	}
	logf.FromContext(ctx).Info("Boot image verified", "image", c.To, "machine", c.Machine)
	s.Recorder.Eventf(sub.Live, corev1.EventTypeNormal, ReasonBootImageVerified, "Machine %s booted %s and became a node: the new boot image is verified", c.Machine, c.To)
	return nil
}

// restore puts the object back on the image its newest change replaced, records the machine and
// its error in the history, and holds the failed target, in one patch with optimistic locking.
func (s BootImages) restore(ctx context.Context, sub VerifySubject, h bootimage.History, v bootimage.Verdict, now time.Time) error {
	c, _ := h.Newest()
	c.Outcome, c.Machine, c.Error = bootimage.Failed, v.Machine, v.Error
	key := client.ObjectKeyFromObject(sub.Live)
	// Where nothing is put back, the failure is recorded, and said once that write is in: a
	// reconcile on a cache that has not seen it yet would say it again, and its write is refused.
	if len(c.Revert) == 0 {
		return s.recordFailure(ctx, sub, h.WithNewest(c), "Machine %s failed on boot image %s (%s), and the change from %s cannot be undone: restore it by hand", v.Machine, c.To, v.Error, c.From)
	}
	if current := currentImageOf(sub); current != c.To {
		// Someone changed the image since: undoing the change would undo theirs too.
		return s.recordFailure(ctx, sub, h.WithNewest(c), "Machine %s failed on boot image %s (%s), but the object now has %s, written by someone else: not restored", v.Machine, c.To, v.Error, current)
	}
	hold := bootimage.Hold{Machine: v.Machine, Error: v.Error, By: bootimage.ByRestore, At: now}
	patch, err := bootimage.RestorePatch(sub.prefix, sub.Live.GetResourceVersion(), sub.Obj.Annotations, h.WithNewest(c), hold)
	if err != nil {
		return err
	}
	if sub.prove != nil {
		if err := sub.prove(patch); err != nil {
			return fmt.Errorf("restoring %s %s: %w", sub.Obj.Kind, key, err)
		}
	}
	if err := s.Client.Patch(ctx, sub.Live, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(status.FieldManager)); err != nil {
		return fmt.Errorf("restoring the boot image of %s %s: %w", sub.Obj.Kind, key, err)
	}
	d := bootimage.Decision{Kind: sub.Obj.Kind, APIGroup: string(sub.Obj.APIGroup), Namespace: key.Namespace, Name: key.Name}
	s.Metrics.countRestore(d)
	logf.FromContext(ctx).Info("Restored boot image after a machine failed on it", "from", c.To, "to", c.From, "machine", v.Machine, "error", v.Error)
	s.Recorder.Eventf(sub.Live, corev1.EventTypeWarning, ReasonBootImageRestored, "Restored boot image %s after machine %s failed on %s: %s. %s is held until the stream moves past it or the hold is cleared: %s", c.From, v.Machine, c.To, v.Error, c.To, bootimage.ClearCommand(d))
	return nil
}

// recordFailure stores h, whose newest change failed and is not undone, and then says so in a
// Warning Event.
func (s BootImages) recordFailure(ctx context.Context, sub VerifySubject, h bootimage.History, format string, args ...any) error {
	if err := s.recordOutcome(ctx, sub, h); err != nil {
		return err
	}
	message := fmt.Sprintf(format, args...)
	logf.FromContext(ctx).Info("Boot image failed and not restored", "reason", message)
	s.Recorder.Event(sub.Live, corev1.EventTypeWarning, ReasonBootImageRestored, message)
	return nil
}

// recordOutcome stores h with optimistic locking.
func (s BootImages) recordOutcome(ctx context.Context, sub VerifySubject, h bootimage.History) error {
	patch, err := bootimage.Decision{}.JSONPatch(sub.prefix, sub.Live.GetResourceVersion(), h.PatchOp(sub.Obj.Annotations))
	if err != nil {
		return err
	}
	return s.Client.Patch(ctx, sub.Live, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(status.FieldManager))
}

// MachineImageFailure is the platform's pattern of image errors; nil when it has none.
func MachineImageFailure(platform configv1.PlatformType) *regexp.Regexp {
	p, ok := bootimage.PlatformFor(platform)
	if !ok {
		return nil
	}
	return p.Traits().ImageFailure
}

// machineEvidence reduces Machine API machines for bootimage.Verify: the image their providerSpec
// names, their Node, and what their machine controller said (errorMessage, and the messages of
// the providerStatus conditions that are not True, where the providers put the cloud's answer to
// a launch).
func machineEvidence(platform configv1.PlatformType, machines []machinev1beta1.Machine) []bootimage.Machine {
	out := make([]bootimage.Machine, 0, len(machines))
	for i := range machines {
		m := &machines[i]
		e := bootimage.Machine{Name: m.Name, Created: m.CreationTimestamp.Time, Deleting: m.DeletionTimestamp != nil}
		if m.Spec.ProviderSpec.Value != nil {
			e.Image = bootimage.CurrentImage(platform, bootimage.Object{ProviderSpec: m.Spec.ProviderSpec.Value.Raw})
		}
		if m.Status.NodeRef != nil {
			e.Node = m.Status.NodeRef.Name
		}
		e.Failed = m.Status.Phase != nil && *m.Status.Phase == "Failed"
		if m.Status.ErrorMessage != nil && *m.Status.ErrorMessage != "" {
			e.Errors = append(e.Errors, *m.Status.ErrorMessage)
		}
		if m.Status.ProviderStatus != nil {
			e.Errors = append(e.Errors, failingConditionMessages(m.Status.ProviderStatus.Raw)...)
		}
		out = append(out, e)
	}
	return out
}

// failingConditionMessages returns the messages of the conditions in a providerStatus that are
// not True.
func failingConditionMessages(providerStatus []byte) []string {
	var ps struct {
		Conditions []struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"conditions"`
	}
	if json.Unmarshal(providerStatus, &ps) != nil {
		return nil
	}
	var out []string
	for _, c := range ps.Conditions {
		if c.Status != "True" && c.Message != "" {
			out = append(out, c.Message)
		}
	}
	return out
}

// currentImageOf is the boot image sub's providerSpec names now.
func currentImageOf(sub VerifySubject) string {
	return bootimage.CurrentImage(sub.Platform, sub.Obj)
}
