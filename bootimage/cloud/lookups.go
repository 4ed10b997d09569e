package cloud

import (
	"time"

	"golang.org/x/sync/singleflight"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// lookups remembers answers by key, at most size of them and each for its ttl, and sends one
// lookup per key at a time: callers asking for a key in flight wait for that answer. No lock is
// held while a lookup runs. Errors are not remembered.
type lookups[V any] struct {
	cache  *utilcache.LRUExpireCache
	flight singleflight.Group
}

func newLookups[V any](size int) *lookups[V] {
	return &lookups[V]{cache: utilcache.NewLRUExpireCache(size)}
}

func (l *lookups[V]) get(key string, ttl time.Duration, lookup func() (V, error)) (V, error) {
	if v, ok := l.cache.Get(key); ok {
		return v.(V), nil
	}
	v, err, _ := l.flight.Do(key, func() (any, error) {
		// A lookup for key may have finished between the Get above and this flight.
		if v, ok := l.cache.Get(key); ok {
			return v, nil
		}
		v, err := lookup()
		if err != nil {
			return nil, err
		}
		l.cache.Add(key, v, ttl)
		return v, nil
	})
	if err != nil {
		var zero V
		return zero, err
	}
	return v.(V), nil
}
