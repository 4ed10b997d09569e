package controllers

import (
	"context"
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

type leaderOnly struct{ manager.RunnableFunc }

func (leaderOnly) NeedLeaderElection() bool { return false }

// A Cluster API controller that stops with an error (caches that never sync) must not stop the
// manager: its runnable returns nil and reports the error instead.
func TestGuardedRunnableReportsInsteadOfFailing(t *testing.T) {
	failure := errors.New("failed to wait for clusterapi-machineset caches to sync")
	var reported error
	g := guardedRunnable{
		Runnable: leaderOnly{func(context.Context) error { return failure }},
		stopped:  func(_ context.Context, err error) { reported = err },
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatalf("Start returned %v: the manager would stop", err)
	}
	if !errors.Is(reported, failure) {
		t.Fatalf("reported %v, want %v", reported, failure)
	}
	if g.NeedLeaderElection() {
		t.Fatal("NeedLeaderElection is the runnable's own")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reported = nil
	_ = g.Start(ctx)
	if reported != nil {
		t.Fatal("a stop at shutdown is no failure")
	}
}
