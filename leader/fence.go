// Package leader fences the writes of a leader-elected process on the time of its last lease
// renewal: a process that has not renewed its lease within the lease duration, less a margin for
// clock skew, may have been replaced and makes no write. client-go's elector alone does not
// promise that: a process paused past its lease (SIGSTOP, a frozen VM, a stalled renew request)
// keeps leading until its renew loop notices, and gives each renew round a fresh deadline.
package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
)

// DefaultSkewMargin is taken off the lease duration: what the clocks of two replicas may drift
// apart over one lease.
const DefaultSkewMargin = 10 * time.Second

// ErrFenced is returned, wrapped, for a write refused because the lease is not surely held.
var ErrFenced = errors.New("not written: this process does not surely hold the leader lease")

// Fence refuses writes unless the lease was renewed less than LeaseDuration - SkewMargin ago. The
// renewal time is when the renew request was sent, so the fence closes before any other replica
// can have seen the lease expire. A nil *Fence (no leader election) refuses nothing.
type Fence struct {
	leaseDuration, margin time.Duration

	mu       sync.Mutex
	identity string
	// holder is the lease's holder as last read.
	holder   string
	renewed  time.Time // when the last successful acquire or renew was sent; zero when not leading
	timer    *time.Timer
	lost     chan struct{}
	lostOnce sync.Once
	reason   string
	// gaveUp is true when the lease was lost by releasing it: a normal shutdown.
	gaveUp bool
}

// NewFence returns a fence for a lease of leaseDuration, closing margin before it ends.
func NewFence(leaseDuration, margin time.Duration) *Fence {
	return &Fence{leaseDuration: leaseDuration, margin: margin, lost: make(chan struct{})}
}

// Check returns nil while the lease is surely held, else an error wrapping ErrFenced saying why.
func (f *Fence) Check() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.lost:
		return fmt.Errorf("%w: %s", ErrFenced, f.reason)
	default:
	}
	if f.renewed.IsZero() {
		return fmt.Errorf("%w: not leading", ErrFenced)
	}
	if age := time.Since(f.renewed); age >= f.leaseDuration-f.margin {
		f.loseLocked(fmt.Sprintf("the lease was last renewed %s ago; it lasts %s, less %s for clock skew", age.Round(time.Second), f.leaseDuration, f.margin))
		return fmt.Errorf("%w: %s", ErrFenced, f.reason)
	}
	return nil
}

// closesAt returns when the fence closes unless the lease is renewed first: the last renewal's
// send time plus the lease duration, less the margin. It fails with ErrFenced when closed.
func (f *Fence) closesAt() (time.Time, error) {
	if err := f.Check(); err != nil {
		return time.Time{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.renewed.Add(f.leaseDuration - f.margin), nil
}

// Context returns ctx with a deadline at the fence's closing time as of now, for one fenced step:
// a request not sent by then is never sent, and one still in flight is cancelled then. It fails
// with ErrFenced when the fence is closed. A nil fence returns ctx unchanged.
func (f *Fence) Context(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if f == nil {
		return ctx, func() {}, nil
	}
	closes, err := f.closesAt()
	if err != nil {
		return ctx, func() {}, err
	}
	ctx, cancel := context.WithDeadlineCause(ctx, closes, ErrFenced)
	return ctx, cancel, nil
}

// Send checks, as a request is about to leave the process, that the fence is open and that the
// request's own deadline has not passed: after a pause the wall clock is past a deadline whose
// timer has not fired yet.
func (f *Fence) Send(ctx context.Context) error {
	if f == nil {
		return nil
	}
	if err := f.Check(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return fmt.Errorf("%w: the request's deadline passed before it was sent", context.DeadlineExceeded)
	}
	return nil
}

// Bind returns ctx cancelled, with cause ErrFenced, once the fence closes, however often the
// lease is renewed before: for a step that may outlast one lease, such as an upload, whose
// requests Send checks as they go.
func (f *Fence) Bind(ctx context.Context) (context.Context, context.CancelFunc) {
	if f == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-f.Lost():
			cancel(ErrFenced)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

type fenceKey struct{}

// newContext returns ctx carrying f, for the code that makes requests without the manager's
// client (the vCenter adapter) to fence them with f.Context and f.Send.
func newContext(ctx context.Context, f *Fence) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, fenceKey{}, f)
}

// fromContext returns the fence ctx carries; nil, which refuses nothing, when there is none.
func fromContext(ctx context.Context) *Fence {
	f, _ := ctx.Value(fenceKey{}).(*Fence)
	return f
}

// Lost is closed once the lease is known lost: not renewed in time, or held by another identity
// after this process held it. A process should exit then; it never writes again.
func (f *Fence) Lost() <-chan struct{} {
	if f == nil {
		return nil
	}
	return f.lost
}

// Identity is the identity this process holds the lease as.
func (f *Fence) Identity() string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.identity
}

// Reason says why the lease was lost; empty while it is not.
func (f *Fence) Reason() string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reason
}

func (f *Fence) renewedAt(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.lost:
		return // lost is final, even if a late renew succeeds
	default:
	}
	f.renewed = sent
	if f.timer != nil {
		f.timer.Stop()
	}
	// Known lost the moment the lease may have ended, not when the next write or renew notices.
	f.timer = time.AfterFunc(time.Until(sent.Add(f.leaseDuration-f.margin)), func() { _ = f.Check() })
}

// heldBy notes the lease's holder as read.
func (f *Fence) heldBy(holder string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holder = holder
	if !f.renewed.IsZero() && holder != f.identity {
		f.loseLocked(fmt.Sprintf("the lease is held by %q", holder))
	}
}

// released notes that this process gave the lease up.
func (f *Fence) released() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.renewed.IsZero() {
		f.loseLocked("the lease was released")
		f.gaveUp = true
	}
}

// lostAndNotReleased reports whether the lease was lost other than by releasing it.
func (f *Fence) lostAndNotReleased() bool {
	if f == nil {
		return false
	}
	select {
	case <-f.lost:
	default:
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.gaveUp
}

func (f *Fence) loseLocked(reason string) {
	f.lostOnce.Do(func() {
		f.reason = reason
		f.renewed = time.Time{}
		if f.timer != nil {
			f.timer.Stop()
		}
		close(f.lost)
	})
}

// Lock returns inner, noting each successful acquire and renew, and each holder it reads.
func (f *Fence) Lock(inner resourcelock.Interface) resourcelock.Interface {
	f.mu.Lock()
	f.identity = inner.Identity()
	f.mu.Unlock()
	return &fencedLock{Interface: inner, fence: f}
}

type fencedLock struct {
	resourcelock.Interface
	fence *Fence
}

func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec != nil {
		l.fence.heldBy(rec.HolderIdentity)
	}
	return rec, raw, err
}

func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ler, func() error { return l.Interface.Create(ctx, ler) })
}

func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity != l.Identity() {
		// client-go releases after a fresh Get, which also refreshes the resourceVersion the
		// release is sent with, but decides on the record it observed before: a deposed leader
		// would clear its successor's lease. Release only a lease last read as ours.
		l.fence.mu.Lock()
		holder := l.fence.holder
		l.fence.mu.Unlock()
		if holder != l.Identity() {
			return fmt.Errorf("not releasing the lease: it is held by %q", holder)
		}
	}
	return l.write(ler, func() error { return l.Interface.Update(ctx, ler) })
}

func (l *fencedLock) write(ler resourcelock.LeaderElectionRecord, send func() error) error {
	sent := time.Now()
	if err := send(); err != nil {
		return err
	}
	l.fence.mu.Lock()
	l.fence.holder = ler.HolderIdentity
	l.fence.mu.Unlock()
	if ler.HolderIdentity == l.Identity() {
		l.fence.renewedAt(sent)
	} else {
		l.fence.released()
	}
	return nil
}

// Client returns c with every write checked against the fence first: create, update, patch,
// apply and delete, of objects and of their subresources (status).
func (f *Fence) Client(c client.WithWatch) client.WithWatch {
	if f == nil {
		return c
	}
	// fenced runs write with a context whose deadline is the fence's closing time: it waits in
	// the client's rate limiter and on the wire only as long as the lease surely lasts.
	fenced := func(ctx context.Context, verb string, obj any, write func(context.Context) error) error {
		wctx, cancel, err := f.Context(ctx)
		if err != nil {
			logf.FromContext(ctx).Info("Write refused: the leader lease is not surely held", "verb", verb, "object", describe(obj), "reason", err.Error())
			return err
		}
		defer cancel()
		return write(wctx)
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return fenced(ctx, "create", obj, func(ctx context.Context) error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return fenced(ctx, "update", obj, func(ctx context.Context) error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return fenced(ctx, "patch", obj, func(ctx context.Context) error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return fenced(ctx, "apply", obj, func(ctx context.Context) error { return c.Apply(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return fenced(ctx, "delete", obj, func(ctx context.Context) error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return fenced(ctx, "deletecollection", obj, func(ctx context.Context) error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return fenced(ctx, "create "+sub, obj, func(ctx context.Context) error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return fenced(ctx, "update "+sub, obj, func(ctx context.Context) error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return fenced(ctx, "patch "+sub, obj, func(ctx context.Context) error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			return fenced(ctx, "apply "+sub, obj, func(ctx context.Context) error { return c.SubResource(sub).Apply(ctx, obj, opts...) })
		},
	})
}

// RoundTripper returns next with every write request (any method but GET, HEAD and OPTIONS)
// checked by Send as it is about to leave the process: one that waited past the fence's
// closing, in a queue or in a paused process, is refused there.
func (f *Fence) RoundTripper(next http.RoundTripper) http.RoundTripper {
	if f == nil {
		return next
	}
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if err := f.Send(req.Context()); err != nil {
				if req.Body != nil {
					_ = req.Body.Close()
				}
				return nil, err
			}
		}
		return next.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func describe(obj any) string {
	if o, ok := obj.(client.Object); ok {
		return fmt.Sprintf("%T %s", o, client.ObjectKeyFromObject(o))
	}
	return fmt.Sprintf("%T", obj)
}

// Configure fences the manager opts describes, through a lease lock it builds as
// controller-runtime would: its client refuses writes while the lease is not surely held, gives
// each a deadline at the fence's closing time and checks it again as the request is sent; the
// context of its runnables carries the fence (FromContext) for requests made without that client.
// It returns nil, and changes nothing, without leader election. opts.NewClient must be unset.
func Configure(cfg *rest.Config, opts *ctrl.Options, margin time.Duration) (*Fence, error) {
	if !opts.LeaderElection {
		return nil, nil
	}
	if opts.NewClient != nil || opts.LeaderElectionResourceLockInterface != nil {
		return nil, errors.New("fencing builds the manager's client and lease lock itself")
	}
	if opts.LeaseDuration == nil || opts.RenewDeadline == nil {
		return nil, errors.New("fencing needs the lease duration and renew deadline")
	}
	if *opts.LeaseDuration <= margin {
		return nil, fmt.Errorf("the lease duration %s must exceed the skew margin %s", *opts.LeaseDuration, margin)
	}
	lockCfg := cfg
	if opts.LeaderElectionConfig != nil {
		lockCfg = opts.LeaderElectionConfig
	}
	lockCfg = rest.AddUserAgent(rest.CopyConfig(lockCfg), "leader-election")
	// As controller-runtime: one hung request must not cost the lease.
	lockCfg.Timeout = max(*opts.RenewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(lockCfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(lockCfg)
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.LeaderElectionNamespace, opts.LeaderElectionID,
		core, coordination, resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, err
	}
	f := NewFence(*opts.LeaseDuration, margin)
	opts.LeaderElectionResourceLockInterface = f.Lock(lock)
	opts.NewClient = func(config *rest.Config, options client.Options) (client.Client, error) {
		if options.HTTPClient != nil {
			hc := *options.HTTPClient
			hc.Transport = f.RoundTripper(hc.Transport)
			options.HTTPClient = &hc
		} else {
			config = rest.CopyConfig(config)
			config.Wrap(f.RoundTripper)
		}
		c, err := client.NewWithWatch(config, options)
		if err != nil {
			return nil, err
		}
		return f.Client(c), nil
	}
	// The runnables' context carries the fence, for the requests of cloud adapters.
	base := opts.BaseContext
	opts.BaseContext = func() context.Context {
		ctx := context.Background()
		if base != nil {
			ctx = base()
		}
		return cloud.WithWriteFence(newContext(ctx, f), f)
	}
	return f, nil
}
