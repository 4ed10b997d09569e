package controllers

import (
	"context"
	"sync"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
)

// FeatureGateReporter tells the admin, in the log and as an Event on FeatureGate/cluster, which of
// the operator's gates are in force, each time that changes. Gated controllers read the gates
// themselves; this only reports.
type FeatureGateReporter struct {
	Gates    featuregates.Reader
	Recorder record.EventRecorder

	mu   sync.Mutex
	last string

	reg steps.Registration
}

// Reconcile reads the gates and reports them when they differ from the last report.
func (r *FeatureGateReporter) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	fg := &configv1.FeatureGate{}
	fg.Name = "cluster"
	gates, err := r.Gates.Current(ctx)
	report := gates.String()
	if err != nil {
		report = err.Error()
	}
	r.mu.Lock()
	changed := report != r.last
	r.last = report
	r.mu.Unlock()
	if !changed && err == nil {
		return ctrl.Result{}, nil
	}
	if changed && err != nil {
		log.Error(err, "Feature gates unknown: boot image controllers hold until they are known")
		r.Recorder.Eventf(fg, corev1.EventTypeWarning, ReasonFeatureGatesUnknown, "Boot image controllers hold: %v", err)
	}
	if err != nil {
		return ctrl.Result{RequeueAfter: steps.GatesRetry}, nil
	}
	log.Info("Feature gates read", "releaseVersion", gates.Version, "gates", report)
	r.Recorder.Eventf(fg, corev1.EventTypeNormal, ReasonFeatureGatesRead, "Release %s: %s", gates.Version, report)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reporter: it runs on any change to FeatureGate/cluster or to
// ClusterVersion/version (which may carry the release version).
func (r *FeatureGateReporter) SetupWithManager(mgr ctrl.Manager) error {
	toSingleton := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "cluster"}}}
	})
	// One worker: one singleton key; last is guarded by mu all the same.
	return r.reg.Controller(mgr, "featuregates", "", controller.Options{MaxConcurrentReconciles: 1}).
		Watches(&configv1.FeatureGate{}, toSingleton).
		Watches(&configv1.ClusterVersion{}, toSingleton).
		Complete(r)
}
