package controllers

import (
	"context"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/migrations"
)

// Config is what the controllers need from the process.
type Config struct {
	// ReleaseVersion is the running release version; empty means read it from ClusterVersion.
	ReleaseVersion string
	// BeforeMigrationWrite is a test seam: see migrations.Runner.BeforeWrite.
	BeforeMigrationWrite func(ctx context.Context, migration string) error
}

// Setup registers every controller of the operator with mgr.
func Setup(mgr ctrl.Manager, cfg Config) error {
	gates := featuregates.Source{Reader: mgr.GetClient(), ReleaseVersion: cfg.ReleaseVersion}
	recorder := eventRecorder(mgr)
	reporter := &FeatureGateReporter{Gates: gates, Recorder: recorder}
	if err := reporter.SetupWithManager(mgr); err != nil {
		return err
	}
	mc := &MachineConfigurationReconciler{
		Client:   mgr.GetClient(),
		Gates:    gates,
		Recorder: recorder,
		Migrations: migrations.Runner{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: recorder,
			Migrations: migrations.All, BeforeWrite: cfg.BeforeMigrationWrite,
		},
	}
	return mc.SetupWithManager(mgr)
}

// eventRecorder returns a core/v1 Event recorder. Unlike events.k8s.io series, which keep the
// first note of repeated events, it keeps each distinct message, which is what an admin reads.
func eventRecorder(mgr ctrl.Manager) record.EventRecorder {
	return mgr.GetEventRecorderFor("bootimage-operator") //nolint:staticcheck // see above
}
