package controllers

import (
	"context"
	"crypto/x509"
	"time"

	"github.com/go-logr/logr"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/kube"
	"github.com/bootimage-operator/bootimage-operator/migrations"
)

// Config is what the controllers need from the process. Zero fields take the defaults named.
type Config struct {
	// Name, when set, prefixes the controller names ("<Name>-machineset"), so that more than one
	// registration can run in one process (controller-runtime refuses a name twice).
	Name string
	// Logger is where the controllers log; the manager's logger when zero.
	Logger logr.Logger
	// Gates gives the feature gates in force; when nil, FeatureGate/cluster is read through the
	// manager's client for ReleaseVersion.
	Gates featuregates.Reader
	// ReleaseVersion is the running release version; empty means read it from ClusterVersion.
	ReleaseVersion string
	// Recorder records the Events; the manager's recorder for "bootimage-operator" when nil.
	Recorder record.EventRecorder
	// Clock stamps annotations and times the progress counts and cloud retries; the real one when nil.
	Clock clock.PassiveClock
	// Metrics and CloudMetrics, when set, count what the operator does; the caller registers them.
	Metrics      *Metrics
	CloudMetrics *cloud.Metrics
	// Images looks up cloud images for pre-flight checks and image classification; when nil, the
	// cluster's clouds are asked (see kube.Catalog).
	Images bootimage.Catalog
	// GCP makes the GCP image lookups of the cluster catalogue; nil links none (gcp.New does).
	GCP cloud.NewGCPLookup
	// CloudRootCAs, when set, are trusted for cloud endpoints (tests trust a local CA).
	CloudRootCAs *x509.CertPool
	// OVACacheDir is the writable directory for downloaded OVAs; empty means DefaultOVACacheDir.
	OVACacheDir string
	// ClusterOperator, when set, names the ClusterOperator whose Upgradeable condition carries the
	// boot image skew guard (for an operator running outside the MCO).
	ClusterOperator string
	// Cloud are the cloud retry timings; zero fields take the defaults.
	Cloud CloudTimings
	// Namespace holds the coreos-bootimages ConfigMap; MCONamespace when empty. The manager's
	// cache must hold its ConfigMaps (CacheOptionsFor).
	Namespace string
	// ContestInterval and ContestedWrites bound the status writes while another writer rewrites
	// this operator's fields: at most ContestedWrites per ContestInterval; zero takes
	// DefaultContestInterval and DefaultContestedWrites.
	ContestInterval time.Duration
	ContestedWrites int
	// CRDPollInterval is how often missing Machine API CRDs are looked for; 0 is
	// DefaultCRDPollInterval.
	CRDPollInterval time.Duration
}

// EventSource is the component name of the operator's Events.
const EventSource = "bootimage-operator"

func (cfg Config) withDefaults(mgr ctrl.Manager) Config {
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = mgr.GetLogger()
	}
	if cfg.Gates == nil {
		cfg.Gates = kube.GateSource{Reader: mgr.GetClient(), ReleaseVersion: cfg.ReleaseVersion}
	}
	if cfg.Recorder == nil {
		cfg.Recorder = eventRecorder(mgr)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = MCONamespace
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Images == nil {
		cfg.Images = kube.Catalog(mgr.GetClient(), cfg.CloudRootCAs, cfg.Cloud.Backoff, cfg.CloudMetrics, cfg.GCP)
	}
	return cfg
}

// Setup registers every controller of the operator with mgr, in the order they are wired.
func Setup(mgr ctrl.Manager, cfg Config) error {
	cfg = cfg.withDefaults(mgr)
	reg := registration{prefix: cfg.Name, logger: cfg.Logger}
	gates, recorder := cfg.Gates, cfg.Recorder

	reporter := &FeatureGateReporter{Gates: gates, Recorder: recorder, reg: reg}
	if err := reporter.SetupWithManager(mgr); err != nil {
		return err
	}

	tracker := NewTracker()
	cfg.Metrics.exportDecisions(tracker)
	streams := &bootimage.StreamCache{}
	machineAPI, err := newCRDGate(mgr, cfg.CRDPollInterval, tracker.Changed)
	if err != nil {
		return err
	}
	machineAPI.logger = cfg.Logger
	mc := &MachineConfigurationReconciler{
		Client:   mgr.GetClient(),
		Gates:    gates,
		Recorder: recorder,
		Metrics:  cfg.Metrics,
		Clock:    cfg.Clock,
		Migrations: migrations.Runner{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: recorder, Clock: cfg.Clock,
			Migrations: migrations.All, BeforeWrite: seams.BeforeMigrationWrite,
		},
		Tracker:         tracker,
		Streams:         streams,
		ClusterOperator: cfg.ClusterOperator,
		Namespace:       cfg.Namespace,
		reg:             reg,
		MachineAPI:      machineAPI,
		Reader:          mgr.GetAPIReader(),
		contest:         statusContest{interval: cfg.ContestInterval, budget: cfg.ContestedWrites},
		counts:          bootimage.CountsHold{Clock: cfg.Clock},
	}
	if err := mc.SetupWithManager(mgr); err != nil {
		return err
	}
	vcenters, templates, err := setupVSphere(mgr, cfg.CloudRootCAs, cfg.OVACacheDir)
	if err != nil {
		return err
	}
	inputs := clusterInputs{Client: mgr.GetClient(), Gates: gates, Images: cfg.Images, Streams: streams, Namespace: cfg.Namespace, Templates: vcenters}
	steps := bootImages{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Inputs: inputs, Recorder: recorder, Tracker: tracker, Timings: cfg.Cloud.withDefaults(),
		Metrics: cfg.Metrics, Clock: cfg.Clock, Templates: templates, Unavailable: newLastingSkips(), reg: reg,
	}
	machineSets := &MachineSetReconciler{steps}
	controlPlane := &ControlPlaneMachineSetReconciler{steps}
	register := func(r interface {
		Register(context.Context, ctrl.Manager) error
	}) func(ctrl.Manager) error {
		return func(mgr ctrl.Manager) error { return r.Register(context.Background(), mgr) }
	}
	if err := machineAPI.add(gatedController{groupVersion: machinev1beta1.GroupVersion, resource: "machinesets", kind: bootimage.KindMachineSet, setup: register(machineSets)}); err != nil {
		return err
	}
	if err := machineAPI.add(gatedController{groupVersion: machinev1.GroupVersion, resource: "controlplanemachinesets", kind: cpmsKind, setup: register(controlPlane)}); err != nil {
		return err
	}
	return mgr.Add(machineAPI)
}

// registration is how one Setup names its controllers and where they log.
type registration struct {
	prefix string
	logger logr.Logger
}

// controller starts the builder of controller name, whose requests are objects of kind (empty
// for a singleton), logging as controller-runtime's builder does but to the registration's logger.
func (r registration) controller(mgr ctrl.Manager, name, kind string, opts controller.Options) *builder.Builder {
	if r.prefix != "" {
		name = r.prefix + "-" + name
	}
	logger := r.logger
	if logger.GetSink() == nil {
		logger = mgr.GetLogger()
	}
	logger = logger.WithValues("controller", name)
	opts.LogConstructor = func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return logger
		}
		l := logger
		if kind != "" {
			l = l.WithValues(kind, klog.KRef(req.Namespace, req.Name))
		}
		return l.WithValues("namespace", req.Namespace, "name", req.Name)
	}
	return ctrl.NewControllerManagedBy(mgr).Named(name).WithOptions(opts)
}

// eventRecorder returns a core/v1 Event recorder. Unlike events.k8s.io series, which keep the
// first note of repeated events, it keeps each distinct message, which is what an admin reads.
func eventRecorder(mgr ctrl.Manager) record.EventRecorder {
	//lint:ignore SA1019 see above
	return mgr.GetEventRecorderFor(EventSource)
}

// CacheOptions limits the manager's cache to the namespaces the controllers read, which are also
// all the shipped RBAC allows: MachineSets, the CPMS and Secrets of openshift-machine-api,
// ConfigMaps of openshift-machine-config-operator.
func CacheOptions() cache.Options { return CacheOptionsFor(MCONamespace) }

// CacheOptionsFor is CacheOptions with the coreos-bootimages ConfigMap in namespace.
func CacheOptionsFor(namespace string) cache.Options {
	machineAPI := map[string]cache.Config{MachineAPINamespace: {}}
	return cache.Options{
		// Nothing reads managedFields from the cache; on a thousand MachineSets they are most of
		// what it would hold.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&machinev1beta1.MachineSet{}:        {Namespaces: machineAPI},
			&machinev1.ControlPlaneMachineSet{}: {Namespaces: machineAPI},
			&corev1.Secret{}:                    {Namespaces: machineAPI},
			&corev1.ConfigMap{}:                 {Namespaces: map[string]cache.Config{namespace: {}}},
		}}
}
