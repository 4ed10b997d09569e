// Package capireconciler holds the Cluster API MachineSet and MachineDeployment boot image
// reconcilers (docs/capi.md): their decision and verification, built on the shared boot image
// steps (package steps), their own cache of openshift-cluster-api, the RBAC check that lets them
// run and the collector of the template copies they make. Package controllers wires them behind
// their CRD gate; the Cluster API decisions are bootimage/clusterapi's, and the reads and writes
// that need the API server's answer internal/capi's.
package capireconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/internal/capi"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/crdgate"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
)

// The kinds a Cluster API controller watches where the API serves them: the Clusters (their
// pause), and the Machine API MachineSets (a twin's change of authority).
var (
	clusterAPIClusters = crdgate.Optional{GroupVersion: clusterapi.GroupVersion, Resource: "clusters", Kind: "Cluster"}
	machineAPITwins    = crdgate.Optional{GroupVersion: machinev1beta1.GroupVersion, Resource: "machinesets", Kind: "MachineSet"}
)

// ClusterAPIKind names the Cluster API controller of kind in the Cluster API CRD gate.
func ClusterAPIKind(kind string) string { return "Cluster API " + kind }

// ClusterAPIReconciler keeps the boot image of one Cluster API MachineSet or MachineDeployment
// (Kind) in step with the stream: it copies the infrastructure machine template with the new boot
// image and points the object at the copy (docs/capi.md).
type ClusterAPIReconciler struct {
	steps.BootImages
	Kind string
	// MachineAPI says whether Machine API MachineSets are served, so that a twin's change of
	// authority (a migration ending) re-decides its Cluster API MachineSet at once.
	MachineAPI *crdgate.Gate
	// Cache is the Cluster API cache, and CAPI a client that reads through it: every read of
	// openshift-cluster-api but the check of an existing copy's content goes there.
	Cache ClusterAPICache
	CAPI  client.Client
	// Copies collects the template copies nothing uses any more.
	Copies *TemplateCollector
	// ClusterAPI runs the Cluster API controllers, and Signal passes canary changes between them
	// (both shared by the controllers of every kind).
	ClusterAPI *crdgate.Gate
	Signal     *CanarySignal
}

// NewObject returns an empty object of r's kind, for reads.
func (r *ClusterAPIReconciler) NewObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(r.Kind))
	return u
}

// Reconcile reads the cluster, the object's template and its Machine API twin, decides, writes an
// update as a template copy and one owner patch, and reports the decision.
func (r *ClusterAPIReconciler) Reconcile(ctx context.Context, owner *unstructured.Unstructured) (ctrl.Result, error) {
	in, ready, err := r.Inputs.Load(ctx)
	if err != nil || !ready {
		return ctrl.Result{}, err
	}
	read, err := r.clusterAPI().Read(ctx, owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	template, cluster, obj := read.Template, read.Cluster, read.Object
	v, err := r.verifyMove(ctx, in, owner, obj, clusterapi.PausedBecause(owner, cluster) != "")
	if err != nil || v.Wrote {
		return ctrl.Result{}, err
	}
	in.Cluster.Canaries = r.canaries(ctx, in.Version)
	d, next, retry, err := r.Decide(ctx, in, owner, &obj)
	if retry != nil || err != nil {
		return steps.OrZero(retry), err
	}
	d = clusterapi.Paused(d, owner, cluster)
	if d, retry, err = r.AWSCopy(ctx, in, owner, obj, d); retry != nil || err != nil {
		return steps.OrZero(retry), err
	}
	// A denial for good is sent again only once the object or the inputs changed.
	key, denialVersion := client.ObjectKeyFromObject(owner), owner.GetResourceVersion()+"/"+in.Version
	d = r.Tracker.Memory(r.Kind, key).Refused(d, denialVersion)
	if d.Action == bootimage.Update {
		var moved bool
		if d, moved, err = r.updateTemplate(ctx, owner, template, d, next); err != nil {
			return r.Forbidden(ctx, owner, err)
		} else if moved {
			// The owner's watch brings the change that moved it; this is the backstop.
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
	}
	if d.Reason == bootimage.ReasonDeniedByPolicy {
		m := r.Tracker.Memory(r.Kind, key)
		m.Denied = steps.Denial{Target: d.Target, Version: denialVersion, Message: d.Message}
		r.Tracker.Remember(r.Kind, key, m)
	}
	d = steps.Verified(d, v, in.Cluster.Verification.Enabled)
	res := steps.WithRecheck(r.WhileGatesUnknown(in, r.Done(ctx, owner, d, in.Version)), d, in.Cluster.Canaries, v)
	ref, err := clusterapi.InfrastructureRef(owner)
	if err != nil || clusterapi.PausedBecause(owner, cluster) != "" {
		return res, nil
	}
	if d.Action == bootimage.Update {
		// The copy just replaced cannot go before the grace period: the sweep takes it then, and
		// a wave of updates stays free of collection.
		return res, nil
	}
	// Whatever was decided: the copies of an owner deselected, in error or now of a
	// MachineDeployment go too, once nothing uses them. Those kept (in use, too young, their
	// owner paused) are the sweep's: no owner comes back on a timer of its own.
	if err := r.Copies.collect(ctx, owner.GetNamespace(), ownerCopies(r.Kind, owner.GetName(), ref.Kind)); err != nil {
		// The error's backoff retries it; a result beside an error is dropped.
		return ctrl.Result{}, err
	}
	return res, nil
}

// gone collects the copies made for an owner that no longer exists, of every template kind of the
// platform (its reference went with it); one its Machines still use is the sweep's.
func (r *ClusterAPIReconciler) gone(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	kinds, err := platformTemplateKinds(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	err = r.Copies.collect(ctx, key.Namespace, ownerCopies(r.Kind, key.Name, kinds...))
	return ctrl.Result{}, err
}

// sweepRequest is the request of the sweep of every copy in openshift-cluster-api: no object has
// an empty name.
var sweepRequest = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: bootimage.ClusterAPINamespace}}

// sweeps queues sweepRequest when the controller starts and then every grace period, so that
// copies whose owner went while the operator was down, or whose last user went without an event
// of their owner, are collected too.
func sweeps(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	go func() {
		ticker := time.NewTicker(grace(ctx))
		defer ticker.Stop()
		for {
			queue.Add(sweepRequest)
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return nil
}

// updateTemplate creates the template copy d asks for (or finds the one an earlier pass made) and
// points owner at it in one guarded patch. A copy name taken by other content is an Error
// TemplateConflict, returned as the decision. moved says the owner's reference changed since it
// was read: nothing was patched, decide again.
func (r *ClusterAPIReconciler) updateTemplate(ctx context.Context, owner, template *unstructured.Unstructured, d bootimage.Decision, next bootimage.Attempts) (bootimage.Decision, bool, error) {
	copied, err := clusterapi.TemplateCopy(template, d)
	if err != nil {
		return d, false, err
	}
	// Claimed first: an old copy reused is not collected before the owner names it.
	if err := r.Copies.claim(ctx, client.ObjectKeyFromObject(copied)); err != nil {
		return d, false, err
	}
	created, err := capi.EnsureTemplate(ctx, r.Client, copied, d)
	if errors.Is(err, capi.ErrTemplateConflict) {
		return clusterapi.TemplateConflict(d, copied.GetName()), false, nil
	}
	if said := capi.DeniedByPolicy(err); said != "" {
		return clusterapi.DeniedByPolicy(d, said), false, nil
	}
	if err != nil {
		rule := status.Rule{Verb: "create", Group: copied.GroupVersionKind().Group, Resource: strings.ToLower(copied.GetKind()) + "s", Namespace: copied.GetNamespace()}
		return d, false, fmt.Errorf("creating %s %s/%s: %w", copied.GetKind(), copied.GetNamespace(), copied.GetName(), status.Forbidden(err, rule))
	}
	if created {
		logf.FromContext(ctx).Info("Created template copy", "template", copied.GetName(), "from", template.GetName())
	}
	// The change rides in the same patch as the move, so it is never lost between the two.
	ops := append([]bootimage.PatchOp{bootimage.AnnotationPatchOp(owner.GetAnnotations(), bootimage.AttemptsAnnotation, next.String())},
		r.moveOps(owner, d, template.GetName(), copied.GetName())...)
	patch, err := clusterapi.InfrastructureRefPatch(owner.GetResourceVersion(), template.GetName(), copied.GetName(), ops...)
	if err != nil {
		return d, false, err
	}
	if err := seams.BeforeOwnerPatch(ctx, owner); err != nil {
		return d, false, err
	}
	err = r.Update(ctx, owner, nil, d, next, patch)
	if capi.OwnerMoved(err) {
		logf.FromContext(ctx).V(1).Info("Owner changed since it was read, deciding again")
		return d, true, nil
	}
	if said := capi.DeniedByPolicy(err); said != "" {
		return clusterapi.DeniedByPolicy(d, said), false, nil
	}
	return d, false, err
}

// clusterAPI reads what the decision of one of r's objects needs besides the cluster, with the
// loader bootimagectl plan reads them with: the template from the Cluster API cache (from the
// server when the cache does not have it yet, rather than call it missing), the Machine
// API twin (a MachineSet's, while the Machine API is served: a cached read would otherwise wait
// for an informer that never syncs) and, for the pause, its Cluster.
func (r *ClusterAPIReconciler) clusterAPI() inputs.ClusterAPI {
	c := inputs.ClusterAPI{Reader: r.CAPI, Mapper: r.Client.RESTMapper(), Live: r.Reader, Pause: true}
	if r.Kind == bootimage.KindMachineSet && !r.MachineAPI.Waiting(bootimage.KindMachineSet) {
		c.MachineAPI = r.Client
	}
	return c
}

// Register registers the reconciler with mgr: per-object keys for changes of the object (and,
// for a MachineDeployment, of its rollout status), and every object when a cluster-wide input
// changes.
func (r *ClusterAPIReconciler) Register(ctx context.Context, mgr ctrl.Manager) error {
	all := func(ctx context.Context, _ client.Object) []reconcile.Request { return r.objects(ctx) }
	none := func(context.Context, client.Object) []reconcile.Request { return nil }
	// An owner reference decides too (a MachineSet a MachineDeployment took over is left alone):
	// nothing else brings that change, no owner being requeued on a timer.
	owners := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
	}}
	changes := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}, owners)
	if r.Kind == bootimage.KindMachineDeployment {
		// The end of a rollout is a status change.
		changes = predicate.ResourceVersionChangedPredicate{}
	}
	name := "clusterapi-" + map[string]string{bootimage.KindMachineSet: "machineset", bootimage.KindMachineDeployment: "machinedeployment"}[r.Kind]
	// Through the gate's scope: the handlers go when the controller stops.
	capi := crdgate.ScopeCache(mgr, r.Cache)
	b := r.Registration.Controller(mgr, name, r.Kind, controller.Options{MaxConcurrentReconciles: steps.MachineSetWorkers}).
		WatchesRawSource(source.Kind[client.Object](capi, r.NewObject(), &handler.EnqueueRequestForObject{}, steps.InNamespace(bootimage.ClusterAPINamespace), changes))
	b, err := r.watchMachines(ctx, b, capi, mgr)
	if err != nil {
		return err
	}
	b = r.watchCanaries(b, capi, all)
	if r.Kind == bootimage.KindMachineSet {
		// One sweep of the namespace is enough.
		b = b.WatchesRawSource(source.Func(sweeps))
	}
	if crdgate.Watch(mgr, clusterAPIClusters) {
		paused := steps.Changed(func(o, n *unstructured.Unstructured) bool {
			was, _, _ := unstructured.NestedBool(o.Object, "spec", "paused")
			is, _, _ := unstructured.NestedBool(n.Object, "spec", "paused")
			return was == is
		})
		b = b.WatchesRawSource(source.Kind[client.Object](capi, clusterAPIObject("Cluster"), handler.EnqueueRequestsFromMapFunc(all), steps.InNamespace(bootimage.ClusterAPINamespace), paused))
	}
	if r.Kind == bootimage.KindMachineSet && crdgate.Watch(mgr, machineAPITwins) {
		twin := func(_ context.Context, ms client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: bootimage.ClusterAPINamespace, Name: ms.GetName()}}}
		}
		b = b.Watches(&machinev1beta1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(twin), builder.WithPredicates(steps.InNamespace(kube.MachineAPINamespace),
			steps.Changed(func(o, n *machinev1beta1.MachineSet) bool {
				return o.Status.AuthoritativeAPI == n.Status.AuthoritativeAPI
			})))
	}
	objects := steps.ObjectReconciler[*unstructured.Unstructured]{
		Client: r.CAPI, Tracker: r.Tracker, Kind: r.Kind, NewObject: r.NewObject, ReconcileObject: r.Reconcile, Gone: r.gone,
	}
	return steps.WatchOSStreams(steps.WatchClusterInputs(b, r.Inputs.Namespace, all, none), mgr, all).Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
		if req == sweepRequest {
			kinds, err := platformTemplateKinds(ctx, r.Client)
			if err != nil {
				return ctrl.Result{}, err
			}
			err = r.Copies.collect(ctx, req.Namespace, copies{kinds: kinds})
			return ctrl.Result{}, err
		}
		return objects.Reconcile(ctx, req)
	}))
}

// objects returns a request for each object of r's kind in openshift-cluster-api.
func (r *ClusterAPIReconciler) objects(ctx context.Context) []reconcile.Request {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(r.Kind + "List"))
	if err := r.CAPI.List(ctx, list, client.InNamespace(bootimage.ClusterAPINamespace), client.UnsafeDisableDeepCopy); err != nil {
		if crdgate.IsNotSynced(err) {
			// Said once by the status; each cluster-wide change would say it again here.
			logf.FromContext(ctx).V(1).Info("Cannot list Cluster API objects", "kind", r.Kind, "reason", err.Error())
			return nil
		}
		logf.FromContext(ctx).Error(err, "Listing Cluster API objects", "kind", r.Kind)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}
