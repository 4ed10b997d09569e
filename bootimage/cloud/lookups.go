// Package cloud holds what the cloud adapters share: the bounded, shared answer cache of
// lookups, failures and their backoff, the write fence of cloud calls and the request observer. It links
// no cloud SDK; the adapters below it (awscloud, gcpcloud, vspherecloud) do, one each.
package cloud

import (
	"context"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// lookupTimeout bounds one shared lookup, SDK retries included. The lookup runs on its own
// context: a caller that gives up stops waiting, but neither cancels the lookup for the others
// nor makes it fail.
const lookupTimeout = time.Minute

// Lookups remembers answers by key, at most size of them and each for its ttl, and sends one
// lookup per key at a time: callers asking for a key in flight wait for that answer. No lock is
// held while a lookup runs. With failures set, a failed lookup is remembered for a growing
// interval (see Backoff), shared by every caller.
type Lookups[V any] struct {
	cache    *utilcache.LRUExpireCache
	flight   singleflight.Group
	failures *failures
	now      func() time.Time
}

// NewLookups returns Lookups holding at most size answers; errors are not remembered.
func NewLookups[V any](size int) *Lookups[V] {
	return &Lookups[V]{cache: utilcache.NewLRUExpireCache(size), now: time.Now}
}

// NewFailingLookups returns Lookups holding at most size answers that remember a failed lookup
// for the growing interval of backoff, shared by every caller.
func NewFailingLookups[V any](size int, backoff Backoff) *Lookups[V] {
	l := NewLookups[V](size)
	l.failures = newFailures(backoff)
	return l
}

// Forget drops the answers whose keys start with prefix: what was just changed must be asked
// again.
func (l *Lookups[V]) Forget(prefix string) {
	l.cache.RemoveAll(func(key any) bool { return strings.HasPrefix(key.(string), prefix) })
}

// Get returns the answer for key, looking it up when it is not known. scope names what a
// region-wide failure of the lookup stops (its endpoint and region).
func (l *Lookups[V]) Get(ctx context.Context, key, scope string, ttl time.Duration, lookup func(context.Context) (V, error)) (V, error) {
	var zero V
	if v, ok := l.cache.Get(key); ok {
		return v.(V), nil
	}
	if l.failures != nil {
		if err := l.failures.active(l.now(), key, scope); err != nil {
			return zero, err
		}
	}
	ch := l.flight.DoChan(key, func() (any, error) {
		// A lookup for key may have finished between the Get above and this flight.
		if v, ok := l.cache.Get(key); ok {
			return v, nil
		}
		if l.failures != nil {
			if err := l.failures.active(l.now(), key, scope); err != nil {
				return nil, err
			}
		}
		lookupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		v, err := lookup(lookupCtx)
		if err != nil {
			if l.failures != nil {
				err = l.failures.record(l.now(), key, scope, err)
			}
			return nil, err
		}
		if l.failures != nil {
			l.failures.forget(key, scope)
		}
		l.cache.Add(key, v, ttl)
		return v, nil
	})
	select {
	case <-ctx.Done():
		return zero, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return zero, res.Err
		}
		return res.Val.(V), nil
	}
}
