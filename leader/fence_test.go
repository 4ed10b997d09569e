package leader

import (
	"context"
	"errors"
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
