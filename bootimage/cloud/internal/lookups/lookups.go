// Package lookups remembers cloud answers for the cloud adapters.
package lookups

import (
	"time"

	"golang.org/x/sync/singleflight"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// Lookups remembers answers by key, at most size of them and each for its ttl, and sends one
// lookup per key at a time: callers asking for a key in flight wait for that answer. No lock is
// held while a lookup runs. Errors are not remembered.
type Lookups[V any] struct {
	cache  *utilcache.LRUExpireCache
	flight singleflight.Group
}

// New returns Lookups holding at most size answers.
func New[V any](size int) *Lookups[V] {
	return &Lookups[V]{cache: utilcache.NewLRUExpireCache(size)}
}

// Get returns the answer for key, looking it up when it has none younger than ttl.
func (l *Lookups[V]) Get(key string, ttl time.Duration, lookup func() (V, error)) (V, error) {
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
