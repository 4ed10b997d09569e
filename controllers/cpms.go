package controllers

import (
	"context"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/cpms"
)

// ControlPlaneMachineSetReconciler keeps the singleton ControlPlaneMachineSet's boot image in step
// with the stream, writing only image-only changes that cannot replace the control plane.
type ControlPlaneMachineSetReconciler struct {
	Client   client.Client
	Inputs   clusterInputs
	Recorder record.EventRecorder
	Tracker  *Tracker
}

const cpmsKind = "ControlPlaneMachineSet"

// Reconcile decides for the CPMS and applies the decision.
func (r *ControlPlaneMachineSetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	c := &machinev1.ControlPlaneMachineSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			// No CPMS (for example user-provisioned infrastructure): nothing to manage, nothing wrong.
			r.Tracker.Forget(cpmsKind, req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	cluster, generation, ready, err := r.Inputs.load(ctx)
	if err != nil || !ready {
		return ctrl.Result{}, err
	}
	obj := cpms.Object(c)
	if obj.UserData, err = userData(ctx, r.Client, obj.ProviderSpec); err != nil {
		return ctrl.Result{}, err
	}
	persisted := bootimage.ParseAttempts(c.Annotations)
	obj.Attempts = r.Tracker.Attempts(cpmsKind, req.NamespacedName, persisted, generation)
	d, err := bootimage.Decide(ctx, cluster, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	d = cpms.Decide(c, d, persisted.Next(d.Target, generation))
	if d.Action == bootimage.Update {
		if err := r.update(ctx, c, d, persisted, generation); err != nil {
			return ctrl.Result{}, err
		}
	}
	report(ctx, r.Recorder, r.Tracker, c, d)
	return ctrl.Result{}, nil
}

func (r *ControlPlaneMachineSetReconciler) update(ctx context.Context, c *machinev1.ControlPlaneMachineSet, d bootimage.Decision, persisted bootimage.Attempts, generation int64) error {
	if d.UserData != nil {
		if err := upgradeUserData(ctx, r.Client, r.Recorder, c.Namespace, bootimage.UserDataSecretName(c.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value.Raw), d); err != nil {
			return err
		}
	}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	patch, err := cpms.Patch(c, d, persisted.Next(d.Target, generation))
	if err != nil {
		return err
	}
	// Checked by cpms.Decide already; checked again on the very bytes sent.
	if err := cpms.ProveImageOnly(c, patch); err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, c, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("patching boot image of ControlPlaneMachineSet %s: %w", key, err)
	}
	r.Tracker.Patched(cpmsKind, key, persisted, d.Target, generation)
	logf.FromContext(ctx).Info("Updated boot image", "controlPlaneMachineSet", key, "from", d.Current, "to", d.Target)
	r.Recorder.Eventf(c, corev1.EventTypeNormal, ReasonBootImageUpdated, "Updated boot image from %s to %s", d.Current, d.Target)
	return nil
}

// SetupWithManager registers the reconciler: the CPMS itself, and the cluster-wide inputs.
func (r *ControlPlaneMachineSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	theCPMS := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: MachineAPINamespace, Name: cpms.Name}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("controlplanemachineset").
		For(&machinev1.ControlPlaneMachineSet{}, builder.WithPredicates(
			inNamespace(MachineAPINamespace),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	return watchClusterInputs(b, theCPMS).Complete(r)
}
