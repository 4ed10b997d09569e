package controllers

import (
	"context"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/cpms"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// ControlPlaneMachineSetReconciler keeps the singleton ControlPlaneMachineSet's boot image in step
// with the stream, writing only image-only changes that cannot replace the control plane.
type ControlPlaneMachineSetReconciler struct {
	steps.BootImages
}

const cpmsKind = bootimage.KindControlPlaneMachineSet

// Reconcile reads the cluster, decides for c by the CPMS's own rules, patches the boot image when
// the change is image-only, and reports the decision. vSphere has no CPMS boot image management.
func (r *ControlPlaneMachineSetReconciler) Reconcile(ctx context.Context, c *machinev1.ControlPlaneMachineSet) (ctrl.Result, error) {
	in, ready, err := r.Inputs.Load(ctx)
	if err != nil || !ready {
		return ctrl.Result{}, err
	}
	obj := cpms.Object(c)
	v, err := r.Verify(ctx, in, steps.CPMSSubject(c, obj))
	if err != nil || v.Wrote {
		return ctrl.Result{}, err
	}
	in.Cluster.Canaries = r.Canaries(ctx, in.Version)
	d, next, retry, err := r.Decide(ctx, in, c, &obj)
	if retry != nil || err != nil {
		return steps.OrZero(retry), err
	}
	if d, retry, err = r.AWSCopy(ctx, in, c, obj, d); retry != nil || err != nil {
		return steps.OrZero(retry), err
	}
	d = cpms.Decide(c, d, next)
	if d.Action == bootimage.Update {
		patch, err := cpms.Patch(c, d, next, r.ChangeOps(c.Annotations, obj, d)...)
		if err != nil {
			return ctrl.Result{}, err
		}
		// cpms.Decide proved it already; prove it again on the very bytes sent.
		if err := cpms.ProveImageOnly(c, patch); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Update(ctx, c, obj.UserData, d, next, patch); err != nil {
			return r.Forbidden(ctx, c, err)
		}
	}
	d = steps.Verified(d, v, in.Cluster.Verification.Enabled)
	return steps.WithRecheck(r.WhileGatesUnknown(in, r.Done(ctx, c, d, in.Version)), d, in.Cluster.Canaries, v), nil
}

// Register registers the reconciler with mgr: the CPMS itself, and the cluster-wide inputs.
func (r *ControlPlaneMachineSetReconciler) Register(_ context.Context, mgr ctrl.Manager) error {
	// One object: any input change, a user-data Secret's included, just decides it again.
	theCPMS := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: kube.MachineAPINamespace, Name: cpms.Name}}}
	}
	// One worker for the one object; what it remembers lives in the Tracker, as for MachineSets.
	b := r.Registration.Controller(mgr, "controlplanemachineset", cpmsKind, controller.Options{MaxConcurrentReconciles: 1}).
		For(&machinev1.ControlPlaneMachineSet{}, builder.WithPredicates(
			steps.InNamespace(kube.MachineAPINamespace),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	// Its machines while it has a change to verify, and the canaries its update may wait for.
	b = b.Watches(&machinev1beta1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.MachineToCPMS), builder.WithPredicates(steps.InNamespace(kube.MachineAPINamespace))).
		Watches(&machinev1beta1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(theCPMS), builder.WithPredicates(steps.InNamespace(kube.MachineAPINamespace), steps.CanaryChanged))
	return steps.WatchOSStreams(steps.WatchClusterInputs(b, r.Inputs.Namespace, theCPMS, theCPMS), mgr, theCPMS).Complete(steps.ObjectReconciler[*machinev1.ControlPlaneMachineSet]{
		// No CPMS (for example user-provisioned infrastructure): nothing to manage, nothing wrong.
		Client: r.Client, Tracker: r.Tracker, Kind: cpmsKind,
		NewObject: func() *machinev1.ControlPlaneMachineSet { return &machinev1.ControlPlaneMachineSet{} }, ReconcileObject: r.Reconcile,
	})
}
