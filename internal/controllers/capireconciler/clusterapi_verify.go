package capireconciler

import (
	"context"
	"regexp"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/internal/capi"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
)

// machineLabel is the label Cluster API puts on the Machines (and infrastructure machines) of an
// object of r's kind, naming it.
func (r *ClusterAPIReconciler) machineLabel() string {
	if r.Kind == bootimage.KindMachineDeployment {
		return clusterapi.DeploymentNameLabel
	}
	return clusterapi.SetNameLabel
}

// verifyMove verifies owner's newest change, a move to a template copy, by the Machines whose
// infrastructure machine was cloned from that copy, as the Machine API objects' are verified
// (bootimage.Verify); a restore points owner back at the template the change replaced. Nothing of
// a paused owner is written.
func (r *ClusterAPIReconciler) verifyMove(ctx context.Context, in steps.LoadedInputs, owner *unstructured.Unstructured, obj bootimage.Object, paused bool) (steps.Verification, error) {
	h, v, pending := r.Pending(ctx, in, obj)
	c, _ := h.Newest()
	if !pending || paused || c.Template == nil {
		if pending {
			v.State = bootimage.Pending
		}
		return v, nil
	}
	machines, err := r.machinesOf(ctx, owner, h, steps.MachineImageFailure(in.Cluster.Platform))
	if err != nil {
		return steps.Verification{}, err
	}
	gone, err := r.templateGone(ctx, owner, c.Template.From)
	if err != nil {
		return steps.Verification{}, err
	}
	if ref, err := clusterapi.InfrastructureRef(owner); gone || err != nil || ref.Name != c.Template.To {
		// A restore would point the owner at nothing, or undo someone's move since: a failure is
		// recorded and said, not undone.
		c.Revert = nil
		h = h.WithNewest(c)
	}
	// Revert's paths are from the owner's root; its image is its template's.
	return r.Judge(ctx, in, steps.VerifySubject{Live: owner, Obj: obj, Platform: in.Cluster.Platform}, h, machines)
}

// templateGone reports whether the template name, of the kind owner names, is not found in the
// Cluster API cache (deleted by someone since the change).
func (r *ClusterAPIReconciler) templateGone(ctx context.Context, owner *unstructured.Unstructured, name string) (bool, error) {
	t, err := capi.TemplateNamed(ctx, r.Client.RESTMapper(), r.CAPI, owner, name)
	return t == nil && err == nil, err
}

// machinesOf reads, from the Cluster API cache, owner's Machines and their infrastructure
// machines, reduced for the newest change of h.
func (r *ClusterAPIReconciler) machinesOf(ctx context.Context, owner *unstructured.Unstructured, h bootimage.History, imageFailure *regexp.Regexp) ([]bootimage.Machine, error) {
	c, _ := h.Newest()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(clusterapi.GroupVersion.WithKind("MachineList"))
	if err := r.CAPI.List(ctx, list, client.InNamespace(owner.GetNamespace()), client.MatchingLabels{r.machineLabel(): owner.GetName()}); err != nil {
		return nil, err
	}
	out := make([]bootimage.Machine, 0, len(list.Items))
	for i := range list.Items {
		m := &list.Items[i]
		infra, err := r.infrastructureMachine(ctx, m)
		if err != nil {
			return nil, err
		}
		out = append(out, clusterapi.MachineOf(m, infra, c, imageFailure))
	}
	return out, nil
}

// infrastructureMachine reads the infrastructure machine Machine m names; nil when it names none,
// its kind is not served or it is not found.
func (r *ClusterAPIReconciler) infrastructureMachine(ctx context.Context, m *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ref, _, _ := unstructured.NestedStringMap(m.Object, "spec", "infrastructureRef")
	if ref["kind"] == "" || ref["name"] == "" {
		return nil, nil
	}
	mapping, err := r.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: clusterapi.InfrastructureGroup, Kind: ref["kind"]})
	if err != nil {
		return nil, nil
	}
	infra := &unstructured.Unstructured{}
	infra.SetGroupVersionKind(mapping.GroupVersionKind)
	err = r.CAPI.Get(ctx, client.ObjectKey{Namespace: m.GetNamespace(), Name: ref["name"]}, infra)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return infra, err
}

// moveOps are the operations an update of owner to d, from template from to the copy to, adds
// beside its attempts: the change in the history, and the removal of a hold the stream has moved
// past. The attempts operation has created the annotations when owner had none.
func (r *ClusterAPIReconciler) moveOps(owner *unstructured.Unstructured, d bootimage.Decision, from, to string) []bootimage.PatchOp {
	annotations := owner.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	h, _ := bootimage.HistoryOf(annotations)
	h = h.With(clusterapi.TemplateMove(d, from, to, r.Clock.Now().UTC()))
	ops := []bootimage.PatchOp{h.PatchOp(annotations)}
	if bootimage.HoldCleared(d, bootimage.Object{Annotations: owner.GetAnnotations()}) {
		ops = append(ops, bootimage.ClearHoldOp())
	}
	return ops
}

// watchMachines has the Machines and infrastructure machines of the Cluster API cache bring their
// owner back while it has a change to verify. It watches the objects the verify step reads (the
// collector holds their metadata besides); a kind not served is not watched,
// nor another platform's infrastructure machines (a Role may grant the cluster's own kinds only,
// and a watch it forbids would never sync).
func (r *ClusterAPIReconciler) watchMachines(ctx context.Context, b *builder.Builder, capi cache.Cache, mgr ctrl.Manager) (*builder.Builder, error) {
	mapper := mgr.GetRESTMapper()
	templateKinds, err := platformTemplateKinds(ctx, mgr.GetAPIReader())
	if err != nil {
		return nil, err
	}
	kinds := []schema.GroupKind{{Group: string(bootimage.ClusterAPIGroup), Kind: "Machine"}}
	for _, t := range templateKinds {
		kinds = append(kinds, schema.GroupKind{Group: clusterapi.InfrastructureGroup, Kind: strings.TrimSuffix(t, "Template")})
	}
	for _, gk := range kinds {
		mapping, err := mapper.RESTMapping(gk)
		if err != nil {
			continue
		}
		gvk := mapping.GroupVersionKind
		if gk.Kind == "Machine" {
			gvk = clusterapi.GroupVersion.WithKind("Machine")
		}
		// The objects the verify step reads, not their metadata: an event of another informer of
		// the kind could come before this one holds the change, and nothing would come after.
		m := &unstructured.Unstructured{}
		m.SetGroupVersionKind(gvk)
		b = b.WatchesRawSource(source.Kind[client.Object](capi, m, handler.EnqueueRequestsFromMapFunc(r.machineToOwner), steps.InNamespace(bootimage.ClusterAPINamespace)))
	}
	return b, nil
}

// machineToOwner maps a Machine or infrastructure machine to the object of r's kind it was made
// for, while that has a change to verify.
func (r *ClusterAPIReconciler) machineToOwner(ctx context.Context, m client.Object) []reconcile.Request {
	name := m.GetLabels()[r.machineLabel()]
	if name == "" {
		return nil
	}
	key := types.NamespacedName{Namespace: m.GetNamespace(), Name: name}
	owner := r.NewObject()
	if r.CAPI.Get(ctx, key, owner) != nil || !steps.PendingChange(owner) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}
