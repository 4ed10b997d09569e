package testenv

import (
	"context"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// Manager is a running controller-runtime manager for one test.
type Manager struct {
	ctrl.Manager
	cancel context.CancelFunc
	done   chan error
	stop   sync.Once
	err    error
}

// StartManager starts a manager on the control plane, with metrics, probes and leader election
// off, after setup registered its controllers. Stop it with Stop.
func (e *Env) StartManager(setup func(ctrl.Manager) error) (*Manager, error) {
	return e.StartManagerWithHooks(seams.Hooks{}, setup)
}

// StartManagerWithHooks is StartManager with the operator's test seams in the context the
// manager gives its controllers.
func (e *Env) StartManagerWithHooks(hooks seams.Hooks, setup func(ctrl.Manager) error) (*Manager, error) {
	skip := true
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		BaseContext:            func() context.Context { return seams.With(context.Background(), hooks) },
		Scheme:                 e.Scheme,
		Cache:                  controllers.CacheOptions(),
		MapperProvider:         controllers.NewRESTMapper,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each test starts its own manager with the same controller names.
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, err
	}
	if err := setup(mgr); err != nil {
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
