package crdgate

import (
	"context"
	"strings"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// scoped is the manager a gated controller is set up with: what it adds runs only for the run
// (scope), an error it stops with is reported to the gate instead of stopping the manager, and
// the event handlers it adds to the manager's cache go when the run ends.
type scoped struct {
	manager.Manager
	scope context.Context
	gate  *Gate
	c     *gated
}

// Add runs r within the run's scope.
func (m scoped) Add(r manager.Runnable) error {
	return m.Manager.Add(scopedRunnable{Runnable: r, m: m})
}

// GetCache is the manager's cache, its handlers removed when the run ends.
func (m scoped) GetCache() cache.Cache { return ScopeCache(m, m.Manager.GetCache()) }

// GetFieldIndexer is the manager's, taking an index again as done: a controller set up again
// registers its indexes again on informers that kept them.
func (m scoped) GetFieldIndexer() client.FieldIndexer { return reindexer{m.Manager.GetFieldIndexer()} }

type reindexer struct{ client.FieldIndexer }

func (r reindexer) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	err := r.FieldIndexer.IndexField(ctx, obj, field, extract)
	if err != nil && strings.Contains(err.Error(), "indexer conflict") {
		return nil
	}
	return err
}

type scopedRunnable struct {
	manager.Runnable
	m scoped
}

// Start runs the runnable until the manager or the run ends, and reports, instead of returning,
// an error it stops with: a runnable's error would stop every other one.
func (r scopedRunnable) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.m.scope, cancel)
	defer stop()
	if err := r.Runnable.Start(ctx); err != nil && ctx.Err() == nil {
		r.m.gate.failed(ctx, r.m.c, r.m.scope, err)
	}
	return nil
}

// NeedLeaderElection keeps the runnable's own answer: a controller runs only while leading.
func (r scopedRunnable) NeedLeaderElection() bool {
	if le, ok := r.Runnable.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

// Watch reports whether the controller being set up with mgr should watch o, that is whether
// the API serves it; the gate restarts the controller when that changes. Outside a gate, it asks
// mgr's REST mapper.
func Watch(mgr manager.Manager, o Optional) bool {
	m, ok := mgr.(scoped)
	if !ok {
		_, err := mgr.GetRESTMapper().RESTMapping(o.GroupVersion.WithKind(o.Kind).GroupKind(), o.GroupVersion.Version)
		return err == nil
	}
	served, err := m.gate.servedNow(o.resource())
	if err != nil {
		served = false
	}
	m.gate.mu.Lock()
	if m.c.optional != nil {
		m.c.optional[o] = served
	}
	m.gate.mu.Unlock()
	return served
}

// Gated reports whether mgr is a gate's scope: a controller set up with it may be set up again
// under the same name.
func Gated(mgr manager.Manager) bool {
	_, ok := mgr.(scoped)
	return ok
}

// ScopeCache returns c with the event handlers added through it removed when the run of the
// controller set up with mgr ends (c itself outside a gate): a stopped controller's handlers
// would otherwise stay on the shared informers for ever.
func ScopeCache(mgr manager.Manager, c cache.Cache) cache.Cache {
	m, ok := mgr.(scoped)
	if !ok {
		return c
	}
	return scopedCache{Cache: c, scope: m.scope}
}

type scopedCache struct {
	cache.Cache
	scope context.Context
}

// WaitForCacheSync does not wait for every informer of the shared cache: a controller's source
// then waits for its own informer (its handler's sync), and one informer that cannot sync (a
// conversion webhook down) holds only the controllers that watch it.
func (c scopedCache) WaitForCacheSync(context.Context) bool { return true }

func (c scopedCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	return scopedInformer{Informer: i, scope: c.scope}, nil
}

type scopedInformer struct {
	cache.Informer
	scope context.Context
}

// removed removes reg once the scope ends.
func (i scopedInformer) removed(reg toolscache.ResourceEventHandlerRegistration, err error) (toolscache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		context.AfterFunc(i.scope, func() { _ = i.Informer.RemoveEventHandler(reg) })
	}
	return reg, err
}

func (i scopedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.removed(i.Informer.AddEventHandler(h))
}

func (i scopedInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, p time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.removed(i.Informer.AddEventHandlerWithResyncPeriod(h, p))
}

func (i scopedInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.removed(i.Informer.AddEventHandlerWithOptions(h, o))
}
