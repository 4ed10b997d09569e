package crdgate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

type leaderOnly struct{ manager.RunnableFunc }

func (leaderOnly) NeedLeaderElection() bool { return false }

// A gated controller that stops with an error (caches that never sync) must not stop the
// manager: its runnable returns nil, and the gate records the stop and waits to start it again.
func TestScopedRunnableReportsInsteadOfFailing(t *testing.T) {
	failure := errors.New("failed to wait for clusterapi-machineset caches to sync")
	g := &Gate{changed: make(chan event.GenericEvent, 1), Hint: "Cluster API is not installed"}
	run := func() (scopedRunnable, *gated) {
		c := &gated{Controller: Controller{Kind: "Cluster API MachineSet"}}
		scope, stop := context.WithCancel(context.Background())
		c.stop = stop
		g.controllers = append(g.controllers, c)
		return scopedRunnable{Runnable: leaderOnly{func(context.Context) error { return failure }}, m: scoped{scope: scope, gate: g, c: c}}, c
	}
	r, c := run()
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start returned %v: the manager would stop", err)
	}
	if c.stop != nil || !strings.Contains(g.Stopped(), failure.Error()) || !g.Waiting(c.Kind) {
		t.Fatalf("the stop is not recorded: running %v, stopped %q", c.stop != nil, g.Stopped())
	}
	if r.NeedLeaderElection() {
		t.Fatal("NeedLeaderElection is the runnable's own")
	}
	r, c = run()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = r.Start(ctx)
	if c.stop == nil {
		t.Fatal("a stop at shutdown is no failure")
	}
}
