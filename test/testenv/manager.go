package testenv

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// Manager is a running controller-runtime manager running the operator for one test.
type Manager struct {
	ctrl.Manager
	cancel context.CancelFunc
	done   chan error
	stop   sync.Once
	err    error
}

// ManagerOptions are controllers.ManagerOptions() as a test runs them: metrics serving and probes
// off, controller names reusable (each test starts its own manager), and hooks in the context
// the manager gives its controllers.
func ManagerOptions(hooks seams.Hooks) ctrl.Options {
	opts := controllers.ManagerOptions()
	opts.BaseContext = func() context.Context { return seams.With(context.Background(), hooks) }
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	skip := true
	opts.Controller = config.Controller{SkipNameValidation: &skip}
	return opts
}

// StartOperator starts a manager on the control plane as an embedder builds it (ManagerOptions,
// controllers.AddToManager with opts), without leader election. opts.Metrics defaults to a
// registry of its own: a registry takes the operator's metrics once. Stop it with Stop.
func (e *Env) StartOperator(opts controllers.Options) (*Manager, error) {
	return e.StartOperatorWithHooks(seams.Hooks{}, opts)
}

// StartOperatorWithHooks is StartOperator with the operator's test seams.
func (e *Env) StartOperatorWithHooks(hooks seams.Hooks, opts controllers.Options) (*Manager, error) {
	mgrOpts := ManagerOptions(hooks)
	mgrOpts.Controller.CacheSyncTimeout = e.CacheSyncTimeout
	mgr, err := ctrl.NewManager(e.Config, mgrOpts)
	if err != nil {
		return nil, err
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	if err := controllers.AddToManager(mgr, opts); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		m.Stop()
		return nil, context.DeadlineExceeded
	}
	return m, nil
}

// Exited returns whether the manager stopped by itself, and its error.
func (m *Manager) Exited() (bool, error) {
	select {
	case err := <-m.done:
		m.done <- err
		return true, err
	default:
		return false, nil
	}
}

// Stop stops the manager and waits for it to finish; later calls return the same result.
func (m *Manager) Stop() error {
	m.stop.Do(func() {
		m.cancel()
		m.err = <-m.done
	})
	return m.err
}
