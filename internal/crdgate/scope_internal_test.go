package crdgate

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

type leaderOnly struct{ manager.RunnableFunc }

func (leaderOnly) NeedLeaderElection() bool { return false }

// A gated controller that stops with an error (caches that never sync) must not stop the
// manager: its runnable returns nil, and the gate records the stop and waits to start it again.
func TestScopedRunnableReportsInsteadOfFailing(t *testing.T) {
	failure := errors.New("failed to wait for clusterapi-machineset caches to sync")
	g := &Gate{changed: make(chan event.GenericEvent, 1), Hint: "Cluster API is not installed"}
	run := func() (scopedRunnable, *gated) {
		c := &gated{Controller: Controller{Kind: "Cluster API MachineSet"}}
		scope, stop := context.WithCancel(context.Background())
		c.stop = stop
		g.controllers = append(g.controllers, c)
		return scopedRunnable{Runnable: leaderOnly{func(context.Context) error { return failure }}, m: scoped{scope: scope, gate: g, c: c}}, c
	}
	r, c := run()
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start returned %v: the manager would stop", err)
	}
	if c.stop != nil || !strings.Contains(g.Stopped(), "The Cluster API MachineSet controller stopped and is retried: its caches did not sync") || !g.Waiting(c.Kind) {
		t.Fatalf("the stop is not recorded: running %v, stopped %q", c.stop != nil, g.Stopped())
	}
	if r.NeedLeaderElection() {
		t.Fatal("NeedLeaderElection is the runnable's own")
	}
	r, c = run()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = r.Start(ctx)
	if c.stop == nil {
		t.Fatal("a stop at shutdown is no failure")
	}
}

// stubInformer records the handlers added to it and removed from it.
type stubInformer struct {
	cache.Informer
	removed chan toolscache.ResourceEventHandlerRegistration
}

type stubRegistration struct {
	toolscache.ResourceEventHandlerRegistration
}

func (i stubInformer) AddEventHandlerWithOptions(toolscache.ResourceEventHandler, toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return &stubRegistration{}, nil
}

func (i stubInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	i.removed <- reg
	return nil
}

type stubCache struct {
	cache.Cache
	informer stubInformer
}

func (c stubCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return c.informer, nil
}

// A stopped controller's handlers leave the shared informers with it: they would otherwise map
// every later event (and read, perhaps from a cache that never syncs) for ever.
func TestScopedCacheRemovesHandlersWhenTheRunEnds(t *testing.T) {
	scope, stop := context.WithCancel(context.Background())
	inner := stubCache{informer: stubInformer{removed: make(chan toolscache.ResourceEventHandlerRegistration, 1)}}
	c := ScopeCache(scoped{scope: scope, gate: &Gate{}, c: &gated{}}, inner)
	i, err := c.GetInformer(context.Background(), &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := i.AddEventHandlerWithOptions(toolscache.ResourceEventHandlerFuncs{}, toolscache.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-inner.informer.removed:
		t.Fatal("removed while the run goes on")
	default:
	}
	stop()
	if got := <-inner.informer.removed; got != reg {
		t.Fatalf("removed %v, want %v", got, reg)
	}
	if !c.WaitForCacheSync(context.Background()) {
		t.Fatal("a source waits for its own informer, not the whole shared cache")
	}
}
