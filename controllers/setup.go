package controllers

import (
	"context"
	"crypto/x509"
	"time"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/migrations"
)

// Config is what the controllers need from the process.
type Config struct {
	// ReleaseVersion is the running release version; empty means read it from ClusterVersion.
	ReleaseVersion string
	// Images looks up cloud images for pre-flight checks and image classification.
	Images bootimage.Catalog
	// CloudRootCAs, when set, are trusted for cloud endpoints (tests trust a local CA).
	CloudRootCAs *x509.CertPool
	// OVACacheDir is the writable directory for downloaded OVAs; empty means DefaultOVACacheDir.
	OVACacheDir string
	// AfterTemplateStep is a test seam: see bootimage.VSphereSwapper.AfterStep.
	AfterTemplateStep func(step bootimage.VSphereSwapStep) error
	// BeforeMigrationWrite is a test seam: see migrations.Runner.BeforeWrite.
	BeforeMigrationWrite func(ctx context.Context, migration string) error
	// ClusterOperator, when set, names the ClusterOperator whose Upgradeable condition carries the
	// boot image skew guard (for an operator running outside the MCO).
	ClusterOperator string
	// Cloud are the cloud retry timings; zero fields take the defaults.
	Cloud CloudTimings
	// ContestInterval and ContestedWrites bound the status writes while another writer rewrites
	// this operator's fields: at most ContestedWrites per ContestInterval; zero takes
	// DefaultContestInterval and DefaultContestedWrites.
	ContestInterval time.Duration
	ContestedWrites int
	// CRDPollInterval is how often missing Machine API CRDs are looked for; 0 is
	// DefaultCRDPollInterval.
	CRDPollInterval time.Duration
}

// Setup registers every controller of the operator with mgr.
func Setup(mgr ctrl.Manager, cfg Config) error {
	gates := featuregates.Source{Reader: mgr.GetClient(), ReleaseVersion: cfg.ReleaseVersion}
	recorder := eventRecorder(mgr)
	reporter := &FeatureGateReporter{Gates: gates, Recorder: recorder}
	if err := reporter.SetupWithManager(mgr); err != nil {
		return err
	}
	tracker := NewTracker()
	exportDecisions(tracker)
	streams := &bootimage.StreamCache{}
	machineAPI, err := newCRDGate(mgr, cfg.CRDPollInterval, tracker.Changed)
	if err != nil {
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
		Tracker:         tracker,
		Streams:         streams,
		ClusterOperator: cfg.ClusterOperator,
		MachineAPI:      machineAPI,
		Reader:          mgr.GetAPIReader(),
		contest:         statusContest{interval: cfg.ContestInterval, budget: cfg.ContestedWrites},
	}
	if err := mc.SetupWithManager(mgr); err != nil {
		return err
	}
	images := cfg.Images
	if images == nil {
		images = ClusterCatalog(mgr.GetClient(), cfg.CloudRootCAs, cfg.Cloud.Backoff)
	}
	vcenters, templates, err := setupVSphere(mgr, cfg.CloudRootCAs, cfg.OVACacheDir, cfg.AfterTemplateStep)
	if err != nil {
		return err
	}
	inputs := clusterInputs{Client: mgr.GetClient(), Gates: gates, Images: images, Streams: streams, Templates: vcenters}
	steps := bootImageSteps{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Inputs: inputs, Recorder: recorder, Tracker: tracker, Timings: cfg.Cloud.withDefaults(), Templates: templates, Unavailable: newLastingSkips()}
	machineSets := &MachineSetReconciler{steps}
	controlPlane := &ControlPlaneMachineSetReconciler{steps}
	if err := machineAPI.add(gatedController{groupVersion: machinev1beta1.GroupVersion, resource: "machinesets", kind: "MachineSet", setup: machineSets.SetupWithManager}); err != nil {
		return err
	}
	if err := machineAPI.add(gatedController{groupVersion: machinev1.GroupVersion, resource: "controlplanemachinesets", kind: cpmsKind, setup: controlPlane.SetupWithManager}); err != nil {
		return err
	}
	return mgr.Add(machineAPI)
}

// eventRecorder returns a core/v1 Event recorder. Unlike events.k8s.io series, which keep the
// first note of repeated events, it keeps each distinct message, which is what an admin reads.
func eventRecorder(mgr ctrl.Manager) record.EventRecorder {
	return mgr.GetEventRecorderFor("bootimage-operator") //nolint:staticcheck // see above
}

// CacheOptions limits the manager's cache to the namespaces the controllers read, which are also
// all the shipped RBAC allows: MachineSets, the CPMS and Secrets of openshift-machine-api,
// ConfigMaps of openshift-machine-config-operator.
func CacheOptions() cache.Options {
	machineAPI := map[string]cache.Config{MachineAPINamespace: {}}
	return cache.Options{
		// Nothing reads managedFields from the cache; on a thousand MachineSets they are most of
		// what it would hold.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&machinev1beta1.MachineSet{}:        {Namespaces: machineAPI},
			&machinev1.ControlPlaneMachineSet{}: {Namespaces: machineAPI},
			&corev1.Secret{}:                    {Namespaces: machineAPI},
			&corev1.ConfigMap{}:                 {Namespaces: map[string]cache.Config{MCONamespace: {}}},
		}}
}
