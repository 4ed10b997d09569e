package controllers

import (
	"context"

	machinev1 "github.com/openshift/api/machine/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/cpms"
)

// ControlPlaneMachineSetReconciler keeps the singleton ControlPlaneMachineSet's boot image in step
// with the stream, writing only image-only changes that cannot replace the control plane.
type ControlPlaneMachineSetReconciler struct {
	bootImageSteps
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
	return r.reconcile(ctx, target{
		live:    c,
		reduced: cpms.Object(c),
		refine:  func(d bootimage.Decision, next bootimage.Attempts) bootimage.Decision { return cpms.Decide(c, d, next) },
		patch: func(d bootimage.Decision, next bootimage.Attempts) ([]byte, error) {
			patch, err := cpms.Patch(c, d, next)
			if err != nil {
				return nil, err
			}
			// cpms.Decide proved it already; prove it again on the very bytes sent.
			return patch, cpms.ProveImageOnly(c, patch)
		},
	})
}

// SetupWithManager registers the reconciler: the CPMS itself, and the cluster-wide inputs.
func (r *ControlPlaneMachineSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// One object: any input change, a user-data Secret's included, just decides it again.
	theCPMS := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: MachineAPINamespace, Name: cpms.Name}}}
	}
	b := r.reg.controller(mgr, "controlplanemachineset", cpmsKind, controller.Options{}).
		For(&machinev1.ControlPlaneMachineSet{}, builder.WithPredicates(
			inNamespace(MachineAPINamespace),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	return watchClusterInputs(b, r.Inputs.Namespace, theCPMS, theCPMS).Complete(r)
}
