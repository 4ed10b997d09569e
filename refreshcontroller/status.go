package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
)

// ReasonNotARefresh is the ConfigRefreshComplete reason of a payload change the daemon cannot
// apply in place without a drain or a reboot: it is left to the next rollout.
const ReasonNotARefresh = "NotARefresh"

// Reasons of a pass that delivers nothing and says why.
const (
	// ReasonWaitingForPayload: the token Secret does not hold the payload of the NodePool's
	// payload hash yet (the ignition server generates it after the hash moves).
	ReasonWaitingForPayload = "WaitingForPayload"
	// ReasonInvalidPayload (Degraded): the token Secret's payload does not decode.
	ReasonInvalidPayload = "InvalidPayload"
	// ReasonDeliveredPayloadUnknown: the upgrade ConfigMap is gone and nodes record a payload
	// hash whose payload the controller no longer has, so it cannot decide a refresh from it.
	ReasonDeliveredPayloadUnknown = "DeliveredPayloadUnknown"
)

// notARefresh reports a payload change that is not a refresh; no node moves. Degraded is the
// plan's: a node that failed an earlier refresh is still named.
func notARefresh(v hypershift.Verdict, plan pool.Progress) pool.Progress {
	msg := fmt.Sprintf("Left to the next rollout (%s): %s", v.Reason, v.Message)
	return pool.Progress{Conditions: heldBack(ReasonNotARefresh, msg, plan)}
}

// heldBack reports a pool that moves no node, and why; Degraded is the plan's.
func heldBack(reason, msg string, plan pool.Progress) []metav1.Condition {
	conditions := []metav1.Condition{
		{Type: pool.ConditionProgressing, Status: metav1.ConditionFalse, Reason: reason, Message: msg},
		{Type: pool.ConditionComplete, Status: metav1.ConditionFalse, Reason: reason, Message: msg},
	}
	for _, c := range plan.Conditions {
		if c.Type == pool.ConditionDegraded {
			conditions = append(conditions, c)
		}
	}
	return conditions
}

// invalidPayload reports a payload that cannot be delivered: Degraded with the reason, and the
// nodes the plan names as failed too.
func invalidPayload(msg string, plan pool.Progress) []metav1.Condition {
	conditions := heldBack(ReasonInvalidPayload, msg, plan)
	d := &conditions[len(conditions)-1]
	if d.Status == metav1.ConditionTrue {
		msg += "; " + d.Message
	}
	d.Status, d.Reason, d.Message = metav1.ConditionTrue, ReasonInvalidPayload, msg
	return conditions
}

// setConditions sets the three ConfigRefresh conditions on the NodePool's status, keeping its
// other conditions and each transition time while the status stays.
func (r *Reconciler) setConditions(ctx context.Context, np *unstructured.Unstructured, conditions []metav1.Condition) error {
	raw, _, err := unstructured.NestedSlice(np.Object, "status", "conditions")
	if err != nil {
		return err
	}
	// A value field, not a pointer to existing: the converter replaces a pointer field with one
	// of its own, which left existing empty and dropped every condition not ours.
	var read struct {
		C []hypershift.NodePoolCondition `json:"c"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"c": raw}, &read); err != nil {
		return err
	}
	existing := read.C
	now := metav1.Now()
	changed := false
	var transitions []hypershift.NodePoolCondition
	for _, c := range hypershift.NodePoolConditions(conditions, np.GetGeneration()) {
		i := indexOf(existing, c.Type)
		if i < 0 {
			c.LastTransitionTime = now
			existing = append(existing, c)
			changed = true
			if c.Type == pool.ConditionDegraded && c.Status == corev1.ConditionTrue {
				transitions = append(transitions, c)
			}
			continue
		}
		old := existing[i]
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now
			transitions = append(transitions, c)
		}
		if old != c {
			existing[i] = c
			changed = true
		}
	}
	if !changed {
		return nil
	}
	list := make([]any, 0, len(existing))
	for _, c := range existing {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		if err != nil {
			return err
		}
		list = append(list, u)
	}
	base := np.DeepCopy()
	if err := unstructured.SetNestedSlice(np.Object, list, "status", "conditions"); err != nil {
		return err
	}
	if err := r.Management.Status().Patch(ctx, np, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager)); err != nil {
		return err
	}
	// Only once written: a conflict retries the pass, which would announce it twice.
	for _, c := range transitions {
		r.announce(ctx, np, c)
	}
	return nil
}

func indexOf(conditions []hypershift.NodePoolCondition, t string) int {
	for i, c := range conditions {
		if c.Type == t {
			return i
		}
	}
	return -1
}

// announce logs, and records as an Event on the NodePool, the ends of a refresh an operator
// follows: complete, or degraded.
func (r *Reconciler) announce(ctx context.Context, np *unstructured.Unstructured, c hypershift.NodePoolCondition) {
	switch {
	case c.Type == pool.ConditionComplete && c.Status == corev1.ConditionTrue:
		log.FromContext(ctx).Info("Refresh complete", "nodePool", np.GetName(), "message", c.Message)
		if r.Events != nil {
			r.Events.Eventf(np, nil, corev1.EventTypeNormal, "RefreshComplete", "Refresh", "%s", c.Message)
		}
	case c.Type == pool.ConditionDegraded && c.Status == corev1.ConditionTrue:
		log.FromContext(ctx).Info("Refresh degraded", "nodePool", np.GetName(), "reason", c.Reason, "message", c.Message)
		if r.Events != nil {
			r.Events.Eventf(np, nil, corev1.EventTypeWarning, c.Reason, "Refresh", "%s", c.Message)
		}
	}
}
