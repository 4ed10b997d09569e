package leader

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// memoryLock is a resourcelock.Interface over one record in memory.
type memoryLock struct {
	id     string
	record resourcelock.LeaderElectionRecord
	writes int
}

func (m *memoryLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r := m.record
	return &r, []byte(r.HolderIdentity), nil
}
func (m *memoryLock) Create(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	m.record, m.writes = r, m.writes+1
	return nil
}
func (m *memoryLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	m.record, m.writes = r, m.writes+1
	return nil
}
func (m *memoryLock) RecordEvent(string) {}
func (m *memoryLock) Identity() string   { return m.id }
func (m *memoryLock) Describe() string   { return "memory/" + m.id }
func ours(id string) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: id}
}

func TestFenceClosesWhenTheLeaseMayHaveEnded(t *testing.T) {
	f := NewFence(300*time.Millisecond, 100*time.Millisecond)
	lock := f.Lock(&memoryLock{id: "a"})
	if err := f.Check(); !errors.Is(err, ErrFenced) {
		t.Fatalf("before leading: %v, want ErrFenced", err)
	}
	if err := lock.Create(context.Background(), ours("a")); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatalf("just renewed: %v", err)
	}
	select {
	case <-f.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("not known lost after the lease duration")
	}
	if err := f.Check(); !errors.Is(err, ErrFenced) {
		t.Fatalf("after the lease: %v, want ErrFenced", err)
	}
	// Lost is final: a late renewal does not reopen the fence.
	if err := lock.Update(context.Background(), ours("a")); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); !errors.Is(err, ErrFenced) {
		t.Fatalf("after a late renewal: %v, want ErrFenced", err)
	}
	if !f.lostAndNotReleased() {
		t.Fatal("an expired lease is not a release")
	}
}

func TestFenceLosesToAnotherHolderAndNeverReleasesItsLease(t *testing.T) {
	f := NewFence(time.Hour, time.Minute)
	mem := &memoryLock{id: "a"}
	lock := f.Lock(mem)
	if err := lock.Create(context.Background(), ours("a")); err != nil {
		t.Fatal(err)
	}
	mem.record = ours("b") // b took the lease over
	if _, _, err := lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); !errors.Is(err, ErrFenced) {
		t.Fatalf("held by b: %v, want ErrFenced", err)
	}
	writes := mem.writes
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err == nil || mem.writes != writes {
		t.Fatalf("released b's lease: err %v, %d writes", err, mem.writes-writes)
	}
}

func TestFenceReleaseIsANormalStop(t *testing.T) {
	f := NewFence(time.Hour, time.Minute)
	lock := f.Lock(&memoryLock{id: "a"})
	if err := lock.Create(context.Background(), ours("a")); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); !errors.Is(err, ErrFenced) {
		t.Fatalf("released: %v, want ErrFenced", err)
	}
	if f.lostAndNotReleased() {
		t.Fatal("a release is a normal stop")
	}
}

func TestNilFenceRefusesNothing(t *testing.T) {
	var f *Fence
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

// A write that passed the fence in time but waited on the way out past its closing time (a
// paused process, a full queue) is refused as it is sent, and carried the closing time as its
// deadline.
func TestFencedWriteCarriesTheClosingTimeAndIsCheckedAsItIsSent(t *testing.T) {
	f := NewFence(400*time.Millisecond, 100*time.Millisecond)
	sent := time.Now()
	if err := f.Lock(&memoryLock{id: "a"}).Create(context.Background(), ours("a")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel, err := f.Context(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || d.Before(sent) || d.After(time.Now().Add(300*time.Millisecond)) {
		t.Fatalf("deadline %v, want the fence's closing time, within 300ms of the renewal", d)
	}
	var reached int
	rt := f.RoundTripper(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		reached++
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}))
	req := func(method string) *http.Request {
		r, _ := http.NewRequestWithContext(ctx, method, "https://api.example.com/apis/machine.openshift.io/v1beta1/machinesets", nil)
		return r
	}
	if _, err := rt.RoundTrip(req(http.MethodPatch)); err != nil || reached != 1 {
		t.Fatalf("open fence: %v, %d sent", err, reached)
	}
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrFenced) {
		t.Fatalf("cause %v, want ErrFenced", context.Cause(ctx))
	}
	if _, err := rt.RoundTrip(req(http.MethodPatch)); !errors.Is(err, ErrFenced) || reached != 1 {
		t.Fatalf("past the closing time: %v, %d sent", err, reached)
	}
	if _, _, err := f.Context(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("a new fenced step: %v, want ErrFenced", err)
	}
	// Reads are not writes: a standby reads.
	if _, err := rt.RoundTrip(req(http.MethodGet)); err != nil || reached != 2 {
		t.Fatalf("a read: %v, %d sent", err, reached)
	}
}

func TestFenceTravelsInTheContext(t *testing.T) {
	f := NewFence(time.Hour, time.Minute)
	if got := fromContext(newContext(context.Background(), f)); got != f {
		t.Fatalf("FromContext = %p, want %p", got, f)
	}
	if fromContext(context.Background()) != nil {
		t.Fatal("a context without a fence carries one")
	}
	// Without one, nothing is fenced.
	ctx, cancel, err := fromContext(context.Background()).Context(context.Background())
	defer cancel()
	if _, ok := ctx.Deadline(); ok || err != nil || fromContext(ctx).Send(ctx) != nil {
		t.Fatal("a nil fence bounded a step")
	}
}
