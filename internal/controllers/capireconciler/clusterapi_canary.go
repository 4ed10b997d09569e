package capireconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/crdgate"
)

// clusterAPIOwners are the Cluster API kinds the operator updates, whose canaries gate the
// objects of both: a controller watches the other kind's only while the API serves it.
var clusterAPIOwners = []crdgate.Optional{
	{GroupVersion: clusterapi.GroupVersion, Resource: "machinesets", Kind: bootimage.KindMachineSet},
	{GroupVersion: clusterapi.GroupVersion, Resource: "machinedeployments", Kind: bootimage.KindMachineDeployment},
}

// canaries reads what the canary Cluster API MachineSets and MachineDeployments say of their
// targets, as the Machine API canaries are read: their history, and their decisions on the
// inputs of version. The Machine API's canaries gate the Machine API's objects only
// (docs/verification.md#canaries).
func (r *ClusterAPIReconciler) canaries(ctx context.Context, version string) bootimage.Canaries {
	c := bootimage.Canaries{Targets: map[string]bootimage.Canary{}}
	for _, kind := range clusterAPIOwners {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kind.GroupVersion.WithKind(kind.Kind + "List"))
		// By label in the one namespace: the Cluster API cache's informers start before a
		// controller could add an index to them.
		err := r.CAPI.List(ctx, list, client.InNamespace(bootimage.ClusterAPINamespace), client.MatchingLabels{bootimage.CanaryLabel: "true"}, client.UnsafeDisableDeepCopy)
		if err != nil {
			// A kind not served (or not synced yet) has no canaries to wait for.
			continue
		}
		decided := r.Tracker.Decisions(kind.Kind, version)
		for i := range list.Items {
			o := &list.Items[i]
			d, ok := decided[client.ObjectKeyFromObject(o)]
			c.NoteCanary(kind.Kind+" "+o.GetName(), o.GetAnnotations(), d, ok)
		}
	}
	return c
}

// watchCanaries brings every object of r's kind back when a canary's history or canary label
// changes, for each Cluster API kind the API serves: an object waiting for a canary is decided
// again by that event, not by a timer.
func (r *ClusterAPIReconciler) watchCanaries(b *builder.Builder, capi cache.Cache, mgr ctrl.Manager, all handler.MapFunc) *builder.Builder {
	for _, kind := range clusterAPIOwners {
		if kind.Kind != r.Kind && !crdgate.Watch(mgr, kind) {
			continue
		}
		b = b.WatchesRawSource(source.Kind[client.Object](capi, clusterAPIObject(kind.Kind), handler.EnqueueRequestsFromMapFunc(all), steps.InNamespace(bootimage.ClusterAPINamespace), steps.CanaryChanged))
	}
	return b
}
