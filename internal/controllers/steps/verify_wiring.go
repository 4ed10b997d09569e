package steps

import (
	"context"
	"time"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/cpms"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// Labels the Machine API puts on the machines it creates.
const (
	machineSetLabel  = "machine.openshift.io/cluster-api-machineset"
	machineRoleLabel = "machine.openshift.io/cluster-api-machine-role"
)

// MachineSetProviderSpecPath is where a MachineSet's providerSpec.value sits, for JSON Patch.
const MachineSetProviderSpecPath = "/spec/template/spec/providerSpec/value"

// canaryIndex indexes MachineSets by their canary label.
const canaryIndex = "metadata.labels.canary"

// IndexCanaries registers canaryIndex with the manager's cache.
func IndexCanaries(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &machinev1beta1.MachineSet{}, canaryIndex, func(o client.Object) []string {
		if v := o.GetLabels()[bootimage.CanaryLabel]; v != "" {
			return []string{v}
		}
		return nil
	})
}

// canaryUndecidedRetry is how soon an object waiting for a canary that has no decision yet looks
// again: the canary's decision, unlike its writes, sends no event.
const canaryUndecidedRetry = 5 * time.Second

// MachineSetSubject is ms for the verify step: its machines are those its selector matches.
func MachineSetSubject(ms *machinev1beta1.MachineSet, obj bootimage.Object) VerifySubject {
	sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	if err != nil || sel.Empty() {
		sel = labels.SelectorFromSet(labels.Set{machineSetLabel: ms.Name})
	}
	return VerifySubject{Live: ms, Obj: obj, machines: sel, prefix: MachineSetProviderSpecPath}
}

// CPMSSubject is the ControlPlaneMachineSet for the verify step; a restore is proved image-only as
// its updates are.
func CPMSSubject(c *machinev1.ControlPlaneMachineSet, obj bootimage.Object) VerifySubject {
	sel, err := metav1.LabelSelectorAsSelector(&c.Spec.Selector)
	if err != nil || sel.Empty() {
		sel = labels.SelectorFromSet(labels.Set{machineRoleLabel: "master"})
	}
	return VerifySubject{Live: c, Obj: obj, machines: sel, prefix: cpms.ProviderSpecPath,
		prove: func(patch []byte) error { return cpms.ProveImageOnly(c, patch) }}
}

// ChangeOps are the operations an update to d adds beside its attempts: the change in the
// history, with the patch that undoes it, and the removal of a hold the stream has moved past.
// annotations are the object's; the attempts operation has created them when they were nil.
func (s BootImages) ChangeOps(annotations map[string]string, obj bootimage.Object, d bootimage.Decision) []bootimage.PatchOp {
	if annotations == nil {
		annotations = map[string]string{}
	}
	h, _ := bootimage.HistoryOf(annotations)
	revert, ok := bootimage.RevertOps(obj.ProviderSpec, d.ProviderSpecPatch)
	if !ok {
		revert = nil
	}
	h = h.With(bootimage.Change{From: d.Current, To: d.Target, At: s.Clock.Now().UTC(), By: bootimage.ByOperator, Revert: revert})
	ops := []bootimage.PatchOp{h.PatchOp(annotations)}
	if bootimage.HoldCleared(d, obj) {
		ops = append(ops, bootimage.ClearHoldOp())
	}
	return ops
}

// Canaries reads what the canary MachineSets say of their targets: their history, and their
// decisions on the inputs of version.
func (s BootImages) Canaries(ctx context.Context, version string) bootimage.Canaries {
	list := &machinev1beta1.MachineSetList{}
	// Through the index, so that a wave of N decisions does not match labels N times N.
	err := s.Client.List(ctx, list, client.InNamespace(kube.MachineAPINamespace), client.MatchingFields{canaryIndex: "true"}, client.UnsafeDisableDeepCopy)
	if err != nil {
		err = s.Client.List(ctx, list, client.InNamespace(kube.MachineAPINamespace), client.MatchingLabels{bootimage.CanaryLabel: "true"}, client.UnsafeDisableDeepCopy)
	}
	if err != nil || len(list.Items) == 0 {
		return bootimage.Canaries{}
	}
	c := bootimage.Canaries{Targets: map[string]bootimage.Canary{}}
	decided := s.Tracker.Decisions(bootimage.KindMachineSet, version)
	for i := range list.Items {
		ms := &list.Items[i]
		d, ok := decided[client.ObjectKeyFromObject(ms)]
		c.NoteCanary(ms.Name, ms.Annotations, d, ok)
	}
	return c
}

// Verified sets d's verification state: Pending for an update just written, else what the verify
// step found.
func Verified(d bootimage.Decision, v Verification, enabled bool) bootimage.Decision {
	d.Verification = v.State
	if d.Action == bootimage.Update && enabled {
		d.Verification = bootimage.Pending
	}
	return d
}

// WithRecheck returns res, due no later than v's recheck, and soon while a canary is undecided.
func WithRecheck(res reconcile.Result, d bootimage.Decision, canaries bootimage.Canaries, v Verification) reconcile.Result {
	due := v.recheck
	if d.Reason == bootimage.ReasonWaitingForCanary && canaries.Undecided != "" {
		due = canaryUndecidedRetry
	}
	if due > 0 && (res.RequeueAfter == 0 || due < res.RequeueAfter) {
		res.RequeueAfter = due
	}
	return res
}

// PendingChange reports whether obj's newest change is the operator's and still unverified.
func PendingChange(obj client.Object) bool {
	h, err := bootimage.HistoryOf(obj.GetAnnotations())
	c, ok := h.Newest()
	return err == nil && ok && c.By == bootimage.ByOperator && c.Outcome == ""
}

// MachineToMachineSet maps a Machine to its MachineSet while that has a change to verify.
func (s BootImages) MachineToMachineSet(ctx context.Context, m client.Object) []reconcile.Request {
	name := m.GetLabels()[machineSetLabel]
	if name == "" {
		return nil
	}
	key := types.NamespacedName{Namespace: m.GetNamespace(), Name: name}
	ms := &machinev1beta1.MachineSet{}
	if s.Client.Get(ctx, key, ms) != nil || !PendingChange(ms) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// CanaryChanged passes the updates of a canary's annotations (its history) and canary label, of
// either API family: the objects waiting for it look again.
var CanaryChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(e event.DeleteEvent) bool { return e.Object.GetLabels()[bootimage.CanaryLabel] == "true" },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		canary := e.ObjectNew.GetLabels()[bootimage.CanaryLabel] == "true" || e.ObjectOld.GetLabels()[bootimage.CanaryLabel] == "true"
		return canary && (e.ObjectOld.GetAnnotations()[bootimage.HistoryAnnotation] != e.ObjectNew.GetAnnotations()[bootimage.HistoryAnnotation] ||
			e.ObjectOld.GetLabels()[bootimage.CanaryLabel] != e.ObjectNew.GetLabels()[bootimage.CanaryLabel])
	},
}

// MachineToCPMS maps a control-plane Machine to the ControlPlaneMachineSet while that has a
// change to verify.
func (s BootImages) MachineToCPMS(ctx context.Context, m client.Object) []reconcile.Request {
	if m.GetLabels()[machineRoleLabel] != "master" {
		return nil
	}
	key := types.NamespacedName{Namespace: m.GetNamespace(), Name: cpms.Name}
	c := &machinev1.ControlPlaneMachineSet{}
	if s.Client.Get(ctx, key, c) != nil || !PendingChange(c) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}
