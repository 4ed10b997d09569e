package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ErrLost is returned by Start when the manager stopped because its lease was lost.
var ErrLost = errors.New("leader lease lost")

// Start runs mgr until ctx ends or, fenced by f, until the lease is known lost: a deposed leader
// stops at once instead of when client-go's renew loop gives up.
func Start(ctx context.Context, mgr manager.Manager, f *Fence) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-f.Lost():
			if f.lostAndNotReleased() {
				logf.FromContext(ctx).Info("Leader lease lost: stopping", "reason", f.Reason())
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	err := mgr.Start(ctx)
	if f.lostAndNotReleased() {
		return fmt.Errorf("%w: %s", ErrLost, f.Reason())
	}
	return err
}

// cacheSyncWait bounds how long a probe waits for the caches.
const cacheSyncWait = time.Second

// Readiness returns the /readyz checks and what each means: the manager's caches have synced
// (a replica that just started, or whose API server is unreachable, is not ready), and the
// process either leads on a lease it renewed in time or stands by; a deposed leader, about to
// exit, is not ready.
func Readiness(c cache.Cache, f *Fence) map[string]healthz.Checker {
	return map[string]healthz.Checker{
		"caches-synced": func(req *http.Request) error {
			ctx, cancel := context.WithTimeout(req.Context(), cacheSyncWait)
			defer cancel()
			if !c.WaitForCacheSync(ctx) {
				return errors.New("the informer caches have not synced")
			}
			return nil
		},
		"leader-or-standby": func(*http.Request) error {
			if f.lostAndNotReleased() {
				return fmt.Errorf("%w: %s", ErrLost, f.Reason())
			}
			return nil
		},
	}
}
