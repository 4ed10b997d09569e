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
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// machineSetProviderSpecPath is where a MachineSet's providerSpec.value sits, for JSON Patch.
const machineSetProviderSpecPath = "/spec/template/spec/providerSpec/value"

// userDataSecretIndex indexes MachineSets by the user-data Secret they name.
const userDataSecretIndex = "spec.template.spec.providerSpec.value.userDataSecret.name"

// machineSetWorkers decide and patch MachineSets in parallel: a patch waits on the API server,
// so a few in flight keep it busy without piling up. The reconciler holds no state of its own:
// what it remembers of each object is in the Tracker, under its lock, and the work queue hands a
// MachineSet to one worker at a time, so reading an object's memory and storing the next one
// cannot interleave with another worker's for that object. The template imports lock their own.
const machineSetWorkers = 8

// MachineSetReconciler keeps one MachineSet's boot image in step with the stream.
type MachineSetReconciler struct {
	bootImages
}

// Reconcile reads the cluster, decides for ms, imports a vSphere template when the update needs
// one, patches the boot image, and reports the decision.
func (r *MachineSetReconciler) Reconcile(ctx context.Context, ms *machinev1beta1.MachineSet) (ctrl.Result, error) {
	in, ready, err := r.Inputs.load(ctx)
	if err != nil || !ready {
		return ctrl.Result{}, err
	}
	obj := bootimage.MachineSetObject(ms)
	v, err := r.verify(ctx, in, machineSetSubject(ms, obj))
	if err != nil || v.wrote {
		return ctrl.Result{}, err
	}
	in.cluster.Canaries = r.canaries(ctx, in.version)
	d, next, retry, err := r.decide(ctx, in, ms, &obj)
	if retry != nil || err != nil {
		return orZero(retry), err
	}
	d, wait := r.vsphereImport(ctx, ms, d, in.version)
	if wait != nil {
		return *wait, nil
	}
	if d, wait, err = r.awsCopy(ctx, in, ms, obj, d); wait != nil || err != nil {
		return orZero(wait), err
	}
	if d.Action == bootimage.Update {
		ops := append([]bootimage.PatchOp{bootimage.AnnotationPatchOp(ms.Annotations, bootimage.AttemptsAnnotation, next.String())}, r.changeOps(ms.Annotations, obj, d)...)
		patch, err := d.JSONPatch(machineSetProviderSpecPath, ms.ResourceVersion, ops...)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.update(ctx, ms, obj.UserData, d, next, patch); err != nil {
			return r.forbidden(ctx, ms, err)
		}
	}
	d = verified(d, v, in.cluster.Verification.Enabled)
	return withRecheck(r.whileGatesUnknown(in, r.done(ctx, ms, d, in.version)), d, in.cluster.Canaries, v), nil
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
	if err := indexCanaries(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	all := func(ctx context.Context, _ client.Object) []reconcile.Request { return r.machineSets(ctx) }
	byUserData := func(ctx context.Context, secret client.Object) []reconcile.Request {
		return r.machineSets(ctx, client.MatchingFields{userDataSecretIndex: secret.GetName()})
	}
	b := r.reg.controller(mgr, "machineset", machineSetKind, controller.Options{MaxConcurrentReconciles: machineSetWorkers}).
		For(&machinev1beta1.MachineSet{}, builder.WithPredicates(
			inNamespace(kube.MachineAPINamespace),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	if r.Templates != nil {
		b = b.WatchesRawSource(r.Templates.Source(bootimage.KindMachineSet))
	}
	b = b.Watches(&machinev1beta1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToMachineSet), builder.WithPredicates(inNamespace(kube.MachineAPINamespace))).
		Watches(&machinev1beta1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(all), builder.WithPredicates(inNamespace(kube.MachineAPINamespace), canaryChanged))
	return watchOSStreams(watchClusterInputs(b, r.Inputs.Namespace, all, byUserData), mgr, all).Complete(objectReconciler[*machinev1beta1.MachineSet]{
		client: r.Client, tracker: r.Tracker, kind: bootimage.KindMachineSet,
		newObject: func() *machinev1beta1.MachineSet { return &machinev1beta1.MachineSet{} }, reconcile: r.Reconcile,
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
