package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// lastingSkips remember since when an object's stream target has been unavailable in the cloud
// (Skip TargetImageUnavailable), so one that lasts past the cloud grace period degrades.
type lastingSkips struct {
	mu    sync.Mutex
	since map[trackerKey]lastingSkip
}

type lastingSkip struct {
	target string
	since  time.Time
}

func newLastingSkips() *lastingSkips { return &lastingSkips{since: map[trackerKey]lastingSkip{}} }

// unavailable records that the object's target is unavailable now and returns for how long it has
// been: a new target starts a new clock.
func (l *lastingSkips) unavailable(kind string, name types.NamespacedName, target string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := trackerKey{kind, name}
	s, ok := l.since[k]
	if !ok || s.target != target {
		l.since[k] = lastingSkip{target: target, since: now}
		return 0
	}
	return now.Sub(s.since)
}

// clear forgets the object: its target is available, or no longer due.
func (l *lastingSkips) clear(kind string, name types.NamespacedName) {
	l.mu.Lock()
	delete(l.since, trackerKey{kind, name})
	l.mu.Unlock()
}
