package capireconciler

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
)

// clusterAPIOwners are the Cluster API kinds the operator updates, whose canaries gate the
// objects of both.
var clusterAPIOwners = []string{bootimage.KindMachineSet, bootimage.KindMachineDeployment}

// canaries reads what the canary Cluster API MachineSets and MachineDeployments say of their
// targets, as the Machine API canaries are read: their history, and their decisions on the
// inputs of version. The Machine API's canaries gate the Machine API's objects only
// (docs/verification.md#canaries). The other kind's are read only while its controller runs:
// its informer may never sync (a conversion webhook down), and that must not hold this one.
func (r *ClusterAPIReconciler) canaries(ctx context.Context, version string) bootimage.Canaries {
	c := bootimage.Canaries{Targets: map[string]bootimage.Canary{}}
	for _, kind := range clusterAPIOwners {
		if kind != r.Kind && r.ClusterAPI.Waiting(ClusterAPIKind(kind)) {
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(kind + "List"))
		// By label in the one namespace: the Cluster API cache's informers start before a
		// controller could add an index to them.
		err := r.CAPI.List(ctx, list, client.InNamespace(bootimage.ClusterAPINamespace), client.MatchingLabels{bootimage.CanaryLabel: "true"}, client.UnsafeDisableDeepCopy)
		if err != nil {
			// A kind not served (or not synced yet) has no canaries to wait for.
			continue
		}
		decided := r.Tracker.Decisions(kind, version)
		for i := range list.Items {
			o := &list.Items[i]
			d, ok := decided[client.ObjectKeyFromObject(o)]
			c.NoteCanary(kind+" "+o.GetName(), o.GetAnnotations(), d, ok)
		}
	}
	return c
}

// CanarySignal tells each Cluster API controller that a canary of another kind changed. A
// controller watches its own kind only: watching the other's would stop it whenever that kind's
// informer cannot sync.
type CanarySignal struct {
	mu   sync.Mutex
	subs map[string]chan event.GenericEvent
}

// subscribe returns the channel that brings kind's controller the other kinds' canary changes,
// anew at each start of the controller.
func (s *CanarySignal) subscribe(kind string) chan event.GenericEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[string]chan event.GenericEvent{}
	}
	// One pending signal is enough: its receiver takes every object again.
	ch := make(chan event.GenericEvent, 1)
	s.subs[kind] = ch
	return ch
}

// publish tells every controller but from's, without waiting for any.
func (s *CanarySignal) publish(from string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for kind, ch := range s.subs {
		if kind == from {
			continue
		}
		select {
		case ch <- event.GenericEvent{Object: &unstructured.Unstructured{}}:
		default:
		}
	}
}

// watchCanaries brings every object of r's kind back when a canary's history or canary label
// changes: one of its own kind, which it also tells the other Cluster API controller, or one of
// the other kind, which that controller tells it. An object waiting for a canary is decided again
// by that event, not by a timer.
func (r *ClusterAPIReconciler) watchCanaries(b *builder.Builder, capi cache.Cache, all handler.MapFunc) *builder.Builder {
	enqueue := handler.EnqueueRequestsFromMapFunc(all)
	tell := handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue.Update(ctx, e, q)
			r.Signal.publish(r.Kind)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue.Delete(ctx, e, q)
			r.Signal.publish(r.Kind)
		},
	}
	return b.WatchesRawSource(source.Kind[client.Object](capi, r.NewObject(), tell, steps.InNamespace(bootimage.ClusterAPINamespace), steps.CanaryChanged)).
		WatchesRawSource(source.Channel(r.Signal.subscribe(r.Kind), enqueue))
}
