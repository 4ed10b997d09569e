package controllers

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// userDataSecretIndex indexes MachineSets by the user-data Secret they name.
const userDataSecretIndex = "spec.template.spec.providerSpec.value.userDataSecret.name"

// MachineSetReconciler keeps one MachineSet's boot image in step with the stream.
type MachineSetReconciler struct {
	steps.BootImages
}

// Reconcile reads the cluster, decides for ms, imports a vSphere template when the update needs
// one, patches the boot image, and reports the decision.
func (r *MachineSetReconciler) Reconcile(ctx context.Context, ms *machinev1beta1.MachineSet) (ctrl.Result, error) {
	in, ready, err := r.Inputs.Load(ctx)
	if err != nil || !ready {
		return ctrl.Result{}, err
	}
	obj := bootimage.MachineSetObject(ms)
	v, err := r.Verify(ctx, in, steps.MachineSetSubject(ms, obj))
	if err != nil || v.Wrote {
		return ctrl.Result{}, err
	}
	in.Cluster.Canaries = r.Canaries(ctx, in.Version)
	d, next, retry, err := r.Decide(ctx, in, ms, &obj)
	if retry != nil || err != nil {
		return steps.OrZero(retry), err
	}
	d, wait := r.VSphereImport(ctx, ms, d, in.Version)
	if wait != nil {
		return *wait, nil
	}
	if d, wait, err = r.AWSCopy(ctx, in, ms, obj, d); wait != nil || err != nil {
		return steps.OrZero(wait), err
	}
	if d.Action == bootimage.Update {
		ops := append([]bootimage.PatchOp{bootimage.AnnotationPatchOp(ms.Annotations, bootimage.AttemptsAnnotation, next.String())}, r.ChangeOps(ms.Annotations, obj, d)...)
		patch, err := d.JSONPatch(steps.MachineSetProviderSpecPath, ms.ResourceVersion, ops...)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Update(ctx, ms, obj.UserData, d, next, patch); err != nil {
			return r.Forbidden(ctx, ms, err)
		}
	}
	d = steps.Verified(d, v, in.Cluster.Verification.Enabled)
	return steps.WithRecheck(r.WhileGatesUnknown(in, r.Done(ctx, ms, d, in.Version)), d, in.Cluster.Canaries, v), nil
}

// Register registers the reconciler with mgr: per-MachineSet keys for MachineSet changes, its
// user-data Secret's changes, and every MachineSet when a cluster-wide input changes.
func (r *MachineSetReconciler) Register(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &machinev1beta1.MachineSet{}, userDataSecretIndex, func(o client.Object) []string {
		ms := o.(*machinev1beta1.MachineSet)
		if ms.Spec.Template.Spec.ProviderSpec.Value == nil {
			return nil
		}
		if name := bootimage.UserDataSecretName(ms.Spec.Template.Spec.ProviderSpec.Value.Raw); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := steps.IndexCanaries(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	all := func(ctx context.Context, _ client.Object) []reconcile.Request { return r.machineSets(ctx) }
	byUserData := func(ctx context.Context, secret client.Object) []reconcile.Request {
		return r.machineSets(ctx, client.MatchingFields{userDataSecretIndex: secret.GetName()})
	}
	b := r.Registration.Controller(mgr, "machineset", bootimage.KindMachineSet, controller.Options{MaxConcurrentReconciles: steps.MachineSetWorkers}).
		For(&machinev1beta1.MachineSet{}, builder.WithPredicates(
			steps.InNamespace(kube.MachineAPINamespace),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	if r.Templates != nil {
		b = b.WatchesRawSource(r.Templates.Source(bootimage.KindMachineSet))
	}
	b = b.Watches(&machinev1beta1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.MachineToMachineSet), builder.WithPredicates(steps.InNamespace(kube.MachineAPINamespace))).
		Watches(&machinev1beta1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(all), builder.WithPredicates(steps.InNamespace(kube.MachineAPINamespace), steps.CanaryChanged))
	return steps.WatchOSStreams(steps.WatchClusterInputs(b, r.Inputs.Namespace, all, byUserData), mgr, all).Complete(steps.ObjectReconciler[*machinev1beta1.MachineSet]{
		Client: r.Client, Tracker: r.Tracker, Kind: bootimage.KindMachineSet,
		NewObject: func() *machinev1beta1.MachineSet { return &machinev1beta1.MachineSet{} }, ReconcileObject: r.Reconcile,
	})
}

// machineSets returns a request for each MachineSet of openshift-machine-api matching opts.
func (r *MachineSetReconciler) machineSets(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &machinev1beta1.MachineSetList{}
	// Only the keys are read: the cached objects, not copies.
	if err := r.Client.List(ctx, list, append(opts, client.InNamespace(kube.MachineAPINamespace), client.UnsafeDisableDeepCopy)...); err != nil {
		logf.FromContext(ctx).Error(err, "Listing MachineSets")
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}
