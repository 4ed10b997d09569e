package controllers

import (
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// Config is what the controllers need from the process.
type Config struct {
	// ReleaseVersion is the running release version; empty means read it from ClusterVersion.
	ReleaseVersion string
}

// Setup registers every controller of the operator with mgr.
func Setup(mgr ctrl.Manager, cfg Config) error {
	gates := featuregates.Source{Reader: mgr.GetClient(), ReleaseVersion: cfg.ReleaseVersion}
	reporter := &FeatureGateReporter{Gates: gates, Recorder: eventRecorder(mgr)}
	return reporter.SetupWithManager(mgr)
}

// eventRecorder returns a core/v1 Event recorder. Unlike events.k8s.io series, which keep the
// first note of repeated events, it keeps each distinct message, which is what an admin reads.
func eventRecorder(mgr ctrl.Manager) record.EventRecorder {
	return mgr.GetEventRecorderFor("bootimage-operator") //nolint:staticcheck // see above
}
