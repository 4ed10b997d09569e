package testenv

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Write is one change of an object the API server reported on a watch.
type Write struct {
	Type   watch.EventType
	Object client.Object
}

// Writes records every change the API server reports to objects of one kind, from when it is
// made, in the order the server wrote them. A "never writes" check reads it after a window in
// which the operator had its chance to write (see Barrier): it sees every write, however brief the
// window, where polling a resourceVersion only sees the writes that happen while it polls.
type Writes struct {
	w      watch.Interface
	mu     sync.Mutex
	writes []Write
	// seen wakes Barrier when an event arrives.
	seen chan struct{}
}

// barriers numbers barrier writes, so each is a change.
var barriers atomic.Int64

// WatchWrites starts recording the changes of the objects list holds a kind of. Stop it when done.
func (e *Env) WatchWrites(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (*Writes, error) {
	wc, err := client.NewWithWatch(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, err
	}
	// From the list's resourceVersion on: only changes, not the objects already there.
	if err := wc.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	from := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}}
	w, err := wc.Watch(ctx, list, append(opts, from)...)
	if err != nil {
		return nil, err
	}
	r := &Writes{w: w, seen: make(chan struct{}, 1)}
	go func() {
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue // a watch error; Barrier times out and says so
			}
			r.mu.Lock()
			r.writes = append(r.writes, Write{Type: ev.Type, Object: obj})
			r.mu.Unlock()
			select {
			case r.seen <- struct{}{}:
			default:
			}
		}
	}()
	return r, nil
}

// Stop stops the watch.
func (r *Writes) Stop() { r.w.Stop() }

// Of returns the changes recorded so far of the object named key.
func (r *Writes) Of(key types.NamespacedName) []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Write
	for _, w := range r.writes {
		if w.Object.GetNamespace() == key.Namespace && w.Object.GetName() == key.Name {
			out = append(out, w)
		}
	}
	return out
}

// BarrierAnnotation is the annotation Barrier writes.
const BarrierAnnotation = "testenv.bootimage.openshift.io/barrier"

// Barrier closes a window: it writes BarrierAnnotation on obj, of the watched kind, and waits until
// the watch reports that write. A watch reports an object's changes in order, so every earlier
// write of obj has been recorded by then. It returns obj's changes recorded before the barrier.
// The barrier write itself is the caller's, and may trigger a reconcile of obj after the window.
func (r *Writes) Barrier(ctx context.Context, c client.Client, obj client.Object) ([]Write, error) {
	key := client.ObjectKeyFromObject(obj)
	value := strconv.FormatInt(barriers.Add(1), 10)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, BarrierAnnotation, value)
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("writing the barrier on %s: %w", key, err)
	}
	rv := obj.GetResourceVersion()
	timeout := time.After(30 * time.Second)
	for {
		writes := r.Of(key)
		for i, w := range writes {
			if w.Object.GetResourceVersion() == rv {
				return writes[:i], nil
			}
		}
		select {
		case <-r.seen:
		case <-timeout:
			return nil, fmt.Errorf("the watch did not report the barrier on %s (resourceVersion %s) within 30s", key, rv)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Reconciles returns how many reconciles the named controller has finished in this process, from
// controller-runtime's own counter: a window includes a reconcile once it has gone up.
func Reconciles(controller string) (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total, nil
}

// Resync makes every controller take its objects again without changing what they decide on, as
// the informers' periodic resync would: it changes a field of Infrastructure/cluster that every
// controller watches and no decision reads.
func Resync(ctx context.Context, c client.Client) error {
	infra := &configv1.Infrastructure{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		return err
	}
	infra.Status.APIServerInternalURL = fmt.Sprintf("https://api-int.resync-%d.example.com:6443", time.Now().UnixNano())
	return c.Status().Update(ctx, infra)
}
