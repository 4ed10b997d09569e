// Package vsphereimport imports vSphere templates off the reconcile workers: a MachineSet whose
// update needs a template asks for it and returns; the import's end reconciles it again.
package vsphereimport

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
)

// Template import timings.
const (
	// importTimeout bounds one template import, download and upload included, so a stalled
	// vCenter or mirror cannot hold an import for ever.
	importTimeout = time.Hour
	// importRetryBase is the wait after an import's first failure; it doubles with each failure
	// in a row, up to importRetryMax, for every MachineSet of the template alike.
	importRetryBase = time.Second
	importRetryMax  = 5 * time.Minute
	// importPoll is how often an object that no import end can trigger (no Source of its kind)
	// asks again.
	importPoll = 30 * time.Second
)

// Imports runs vSphere template imports off the reconcile workers, one at a time per
// template, each on a goroutine of its own under the manager's context: a MachineSet whose update
// needs an import asks for it and returns, and when the import ends every MachineSet that asked
// is reconciled again through Source. A slow mirror or vCenter so holds no worker, and shutdown
// cancels the imports under way.
type Imports struct {
	Swapper vsphere.Swapper

	mu sync.Mutex
	// ctx is the runnable's, nil until Start: imports asked for earlier start with it.
	ctx context.Context
	// stopped is set once ctx ended: no import starts after, so wg.Wait sees every one.
	stopped bool
	wg      sync.WaitGroup
	jobs    map[string]*importJob
	// done holds, for the object that asked first, the decision an import made true.
	done    map[Waiter]bootimage.Decision
	sources map[string]chan event.GenericEvent
}

// Waiter is an object waiting for an import.
type Waiter struct {
	Kind string
	Name types.NamespacedName
}

// importJob is the import of one template, under way or failed.
type importJob struct {
	imp     vsphere.Import
	owner   Waiter
	asked   bootimage.Decision
	waiters map[Waiter]struct{}
	running bool
	// err, failures and retryAt are the last failure, how many in a row, and when the next
	// attempt may start; unreported are the waiters not yet told of it.
	err        error
	failures   int
	retryAt    time.Time
	unreported map[Waiter]struct{}
}

// State is what an object asking for an import is told: wait (for a trigger, or poll), or
// the import failed with err and is tried again in retryIn.
type State struct {
	Poll    time.Duration
	Err     error
	RetryIn time.Duration
}

// Source triggers a reconcile of each object of kind that waited for an import once it ends.
func (t *Imports) Source(kind string) source.Source {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sources == nil {
		t.sources = map[string]chan event.GenericEvent{}
	}
	ch := make(chan event.GenericEvent, 1024)
	t.sources[kind] = ch
	return source.Channel[client.Object](ch, &handler.EnqueueRequestForObject{})
}

// Start runs imports until ctx ends, then waits for those under way to see it.
func (t *Imports) Start(ctx context.Context) error {
	t.mu.Lock()
	t.ctx = ctx
	for _, j := range t.jobs {
		if j.running {
			t.run(j)
		}
	}
	t.mu.Unlock()
	<-ctx.Done()
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}

// Request asks for the import of decision d of w, starting it unless one of that template is
// under way or failed too recently.
func (t *Imports) Request(w Waiter, d bootimage.Decision) State {
	imp := vsphere.ImportOf(d)
	key := imp.Key()
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var poll time.Duration
	if t.sources[w.Kind] == nil {
		poll = importPoll
	}
	j := t.jobs[key]
	switch {
	case j != nil && j.running:
		j.waiters[w] = struct{}{}
		return State{Poll: poll}
	case j != nil && (now.Before(j.retryAt) || unreported(j, w)):
		// Each waiter hears of the failure once, even when its retry is due already.
		delete(j.unreported, w)
		return State{Err: j.err, RetryIn: max(j.retryAt.Sub(now), time.Millisecond)}
	}
	next := &importJob{imp: *imp, owner: w, asked: d, waiters: map[Waiter]struct{}{w: {}}, running: true}
	if j != nil {
		next.failures = j.failures
	}
	if t.jobs == nil {
		t.jobs = map[string]*importJob{}
	}
	t.jobs[key] = next
	if t.ctx != nil {
		t.run(next)
	}
	return State{Poll: poll}
}

// run starts j; t.mu is held.
func (t *Imports) run(j *importJob) {
	if t.stopped {
		return
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithTimeout(t.ctx, importTimeout)
		defer cancel()
		log := logf.FromContext(ctx).WithName("vsphere-imports").WithValues("server", j.imp.Server, "folder", j.imp.Folder, "template", j.imp.Name, "release", j.imp.Release)
		log.Info("Importing template", "ova", j.imp.OVALocation, "requestedBy", j.owner.Kind+" "+j.owner.Name.String())
		steps, err := t.Swapper.Swap(ctx, j.imp)
		if err != nil {
			log.Info("Template import failed", "steps", steps, "error", err.Error())
		} else {
			log.Info("Imported template", "steps", steps)
		}
		t.finish(j, steps, err)
	}()
}

// finish records j's end and triggers its waiters.
func (t *Imports) finish(j *importJob, steps []vsphere.SwapStep, err error) {
	t.mu.Lock()
	j.running = false
	if err == nil {
		delete(t.jobs, j.imp.Key())
		// Renaming in is what replaces the template: anything less was clean-up of a template
		// that was current already.
		if slices.Contains(steps, vsphere.SwapRenameIn) {
			if t.done == nil {
				t.done = map[Waiter]bootimage.Decision{}
			}
			t.done[j.owner] = j.asked
		}
	} else {
		j.err, j.failures = err, j.failures+1
		j.retryAt = time.Now().Add(min(importRetryBase<<min(j.failures-1, 16), importRetryMax))
		j.unreported = maps.Clone(j.waiters)
	}
	var events []waiterEvent
	for w := range j.waiters {
		if ch := t.sources[w.Kind]; ch != nil {
			events = append(events, waiterEvent{ch, w})
		}
	}
	t.mu.Unlock()
	for _, e := range events {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: e.w.Name.Namespace, Name: e.w.Name.Name}}
		select {
		case e.ch <- event.GenericEvent{Object: obj}:
		case <-t.ctx.Done():
			return
		}
	}
}

func unreported(j *importJob, w Waiter) bool {
	_, ok := j.unreported[w]
	return ok
}

type waiterEvent struct {
	ch chan event.GenericEvent
	w  Waiter
}

// Imported returns the decision w asked an import for, once that import is made.
func (t *Imports) Imported(w Waiter) (bootimage.Decision, bool) {
	if t == nil {
		return bootimage.Decision{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.done[w]
	return d, ok
}

// Recorded forgets the import made for w: its update was written, or is no longer due.
func (t *Imports) Recorded(w Waiter) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.done, w)
}
