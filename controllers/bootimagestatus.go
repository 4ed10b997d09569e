package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Conditions the boot image controllers report on MachineConfiguration/cluster, as the MCO does.
const (
	ConditionBootImageUpdateProgressing = "BootImageUpdateProgressing"
	ConditionBootImageUpdateDegraded    = "BootImageUpdateDegraded"

	ReasonBootImageUpdating     = "BootImageUpdating"
	ReasonBootImageUpdateFailed = "BootImageUpdateFailed"
)

// maxErrorsInMessage bounds the Degraded message on clusters with many broken MachineSets.
const maxErrorsInMessage = 5

// BootImageStatusReconciler sums up the tracked decisions into the Progressing and Degraded
// conditions, writing them only when they change.
type BootImageStatusReconciler struct {
	Client  client.Client
	Tracker *Tracker
}

type tally struct{ total, reconciled, skipped, updating int }

// Reconcile recomputes the conditions.
func (r *BootImageStatusReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	mc := &operatorv1.MachineConfiguration{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: MachineConfigurationName}, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	sets := &machinev1beta1.MachineSetList{}
	if err := r.Client.List(ctx, sets, client.InNamespace(MachineAPINamespace)); err != nil {
		return ctrl.Result{}, err
	}
	var errs []string
	msDecisions := r.Tracker.Decisions("MachineSet")
	machineSets := tally{total: len(sets.Items)}
	for _, ms := range sets.Items {
		if d, ok := msDecisions[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}]; ok {
			machineSets.add(d, &errs)
		}
	}
	cpms := tally{}
	for _, d := range r.Tracker.Decisions("ControlPlaneMachineSet") {
		cpms.total++
		cpms.add(d, &errs)
	}
	sort.Strings(errs)
	counts := fmt.Sprintf("Reconciled %d of %d MAPI MachineSets (%d skipped) | Reconciled %d of %d ControlPlaneMachineSets (%d skipped)",
		machineSets.reconciled, machineSets.total, machineSets.skipped, cpms.reconciled, cpms.total, cpms.skipped)

	before := mc.DeepCopy()
	progressing := metav1.Condition{Type: ConditionBootImageUpdateProgressing, Status: metav1.ConditionFalse, Reason: ReasonAsExpected, Message: counts, ObservedGeneration: mc.Generation}
	if machineSets.updating+cpms.updating > 0 || machineSets.reconciled+len(errs) < machineSets.total {
		progressing.Status, progressing.Reason = metav1.ConditionTrue, ReasonBootImageUpdating
	}
	degraded := metav1.Condition{Type: ConditionBootImageUpdateDegraded, Status: metav1.ConditionFalse, Reason: ReasonAsExpected, Message: counts, ObservedGeneration: mc.Generation}
	if len(errs) > 0 {
		shown := errs[:min(len(errs), maxErrorsInMessage)]
		degraded.Status, degraded.Reason = metav1.ConditionTrue, ReasonBootImageUpdateFailed
		degraded.Message = fmt.Sprintf("%s | %d failed: %s", counts, len(errs), strings.Join(shown, "; "))
	}
	meta.SetStatusCondition(&mc.Status.Conditions, progressing)
	meta.SetStatusCondition(&mc.Status.Conditions, degraded)
	setDegraded(degraded.Status == metav1.ConditionTrue)
	return ctrl.Result{}, patchStatus(ctx, r.Client, before, mc)
}

func (t *tally) add(d bootimage.Decision, errs *[]string) {
	switch d.Action {
	case bootimage.NoChange:
		t.reconciled++
	case bootimage.Skip:
		t.reconciled++
		t.skipped++
	case bootimage.Update:
		t.updating++
	case bootimage.Error:
		*errs = append(*errs, fmt.Sprintf("%s %s/%s: %s: %s", d.Kind, d.Namespace, d.Name, d.Reason, d.Message))
	}
}

// SetupWithManager registers the reconciler on the tracker's change notifications.
func (r *BootImageStatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toSingleton := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: MachineConfigurationName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("bootimagestatus").
		WatchesRawSource(source.Channel(r.Tracker.Changed, toSingleton)).
		Watches(&operatorv1.MachineConfiguration{}, toSingleton).
		Complete(r)
}
