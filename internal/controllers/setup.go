// Package controllers holds the operator's reconcilers: the Machine API MachineSet and
// ControlPlaneMachineSet boot image reconcilers, the Cluster API MachineSet and MachineDeployment
// reconcilers with their template copy collector, the MachineConfiguration status reconciler and
// the feature gate reporter. Embedders reach them only through controllers.AddToManager, which checks the manager
// first; the status writer, the CRD gate and the vSphere imports are packages of their own.
package controllers

import (
	"context"
	"crypto/x509"
	"maps"
	"time"

	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/go-logr/logr"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/crdgate"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/internal/vsphereimport"
	"github.com/bootimage-operator/bootimage-operator/migrations"
)

// Deps are what the controllers are given, resolved by controllers.AddToManager from its Options
// once it has checked the manager. Every field is set except Images (nil: the cluster's clouds
// are asked, see kube.Clouds), GCP, CloudRootCAs, OVACacheDir, ClusterOperator and Name.
type Deps struct {
	// Name, when set, prefixes the controller names ("<Name>-machineset"), so that more than one
	// registration can run in one process (controller-runtime refuses a name twice).
	Name         string
	Logger       logr.Logger
	Gates        featuregates.Reader
	Recorder     record.EventRecorder
	Clock        clock.PassiveClock
	Metrics      *Metrics
	Images       bootimage.Clouds
	GCP          gcp.NewImages
	CloudRootCAs *x509.CertPool
	OVACacheDir  string
	// ClusterOperator, when set, names the ClusterOperator whose Upgradeable condition carries the
	// boot image skew guard (for an operator running outside the MCO).
	ClusterOperator string
	// Namespace holds the coreos-bootimages ConfigMap.
	Namespace string
	// ContestedWrites rations the status writes while a second writer is seen; 0 is the default.
	ContestedWrites int
}

// EventSource is the component name of the operator's Events.
const EventSource = "bootimage-operator"

// EventRecorder returns a core/v1 Event recorder. Unlike events.k8s.io series, which keep the
// first note of repeated events, it keeps each distinct message, which is what an admin reads.
func EventRecorder(mgr ctrl.Manager) record.EventRecorder {
	//lint:ignore SA1019 see above
	return mgr.GetEventRecorderFor(EventSource)
}

// Add registers every controller of the operator with mgr, in the order they are wired.
// controllers.AddToManager is its one caller.
func Add(mgr ctrl.Manager, deps Deps) error {
	reg := registration{prefix: deps.Name, logger: deps.Logger}
	gates, recorder := deps.Gates, deps.Recorder
	images := deps.Images
	if images == nil {
		images = kube.Clouds(mgr.GetClient(), deps.CloudRootCAs, cloud.Backoff{}, deps.Metrics, deps.GCP)
	}

	reporter := &FeatureGateReporter{Gates: gates, Recorder: recorder, reg: reg}
	if err := reporter.SetupWithManager(mgr); err != nil {
		return err
	}

	tracker := NewTracker()
	deps.Metrics.exportDecisions(tracker)
	streams := &bootimage.StreamCache{}
	machineAPI, err := crdgate.New(mgr, tracker.Changed)
	if err != nil {
		return err
	}
	machineAPI.Logger = deps.Logger
	// Cluster API: started once its CRDs are served and gate ManagedBootImagesAWSCAPI is on (the
	// RBAC for openshift-cluster-api ships with that gate). Its own gate: most clusters never serve
	// these, which is no reason to report the Machine API missing.
	clusterAPI, err := crdgate.New(mgr, tracker.Changed)
	if err != nil {
		return err
	}
	clusterAPI.Logger, clusterAPI.Hint = deps.Logger, "Cluster API is not installed"
	access := &clusterAPIAccess{client: mgr.GetClient(), changed: tracker.Changed}
	capiCache, capiClient, err := newClusterAPICache(mgr)
	if err != nil {
		return err
	}
	mc := &MachineConfigurationReconciler{
		Client:   mgr.GetClient(),
		Gates:    gates,
		Recorder: recorder,
		Metrics:  deps.Metrics,
		Migrations: migrations.Runner{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: recorder, Clock: deps.Clock,
			Migrations: migrations.All, BeforeWrite: seams.BeforeMigrationWrite,
		},
		Tracker:          tracker,
		Streams:          streams,
		Namespace:        deps.Namespace,
		MachineAPI:       machineAPI,
		ClusterAPI:       clusterAPI,
		ClusterAPIReader: capiClient,
		// What keeps the Cluster API controllers from running, for the status.
		ClusterAPIProblem: access.Problem,
		Status: &status.Writer{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: recorder, Clock: deps.Clock, ClusterOperator: deps.ClusterOperator,
			ContestedWrites: deps.ContestedWrites,
		},
		ClusterOperator: deps.ClusterOperator,
		reg:             reg,
		counts:          bootimage.CountsHold{Clock: deps.Clock},
	}
	if err := mc.SetupWithManager(mgr); err != nil {
		return err
	}
	vcenters, templates, err := vsphereimport.Setup(mgr, deps.CloudRootCAs, deps.OVACacheDir)
	if err != nil {
		return err
	}
	clouds := bootimage.Clouds{}
	maps.Copy(clouds, images)
	if vcenters != nil {
		clouds[configv1.VSpherePlatformType] = vcenters
	}
	inputs := clusterInputs{Client: mgr.GetClient(), Gates: gates, Clouds: clouds, Streams: streams, Namespace: deps.Namespace}
	steps := bootImages{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Inputs: inputs, Recorder: recorder, Tracker: tracker,
		Metrics: deps.Metrics, Clock: deps.Clock, Templates: templates, reg: reg, copies: &copyLog{},
	}
	machineSets := &MachineSetReconciler{steps}
	controlPlane := &ControlPlaneMachineSetReconciler{steps}
	register := func(r interface {
		Register(context.Context, ctrl.Manager) error
	}) func(ctrl.Manager) error {
		return func(mgr ctrl.Manager) error { return r.Register(context.Background(), mgr) }
	}
	if err := machineAPI.Add(crdgate.Controller{GroupVersion: machinev1beta1.GroupVersion, Resource: "machinesets", Kind: bootimage.KindMachineSet, Setup: register(machineSets)}); err != nil {
		return err
	}
	if err := machineAPI.Add(crdgate.Controller{GroupVersion: machinev1.GroupVersion, Resource: "controlplanemachinesets", Kind: cpmsKind, Setup: register(controlPlane)}); err != nil {
		return err
	}
	if err := mgr.Add(machineAPI); err != nil {
		return err
	}
	gateOn := func(ctx context.Context) bool {
		g, err := gates.Current(ctx)
		return err == nil && g.Enabled(featuregates.ManagedBootImagesAWSCAPI)
	}
	// Started only where the identity may read what they watch, and never fatal: a Cluster API
	// controller that stops (caches that cannot sync) is reported and started again later.
	ready := func(ctx context.Context) bool { return gateOn(ctx) && access.allowed(ctx) }
	copies := &templateCollector{reader: capiClient, writer: mgr.GetClient(), mapper: mgr.GetRESTMapper(), clock: deps.Clock}
	for _, kind := range []struct{ kind, resource string }{{bootimage.KindMachineSet, "machinesets"}, {bootimage.KindMachineDeployment, "machinedeployments"}} {
		r := &ClusterAPIReconciler{bootImages: steps, Kind: kind.kind, MachineAPI: machineAPI, Cache: capiCache, CAPI: capiClient, Copies: copies}
		c := crdgate.Controller{GroupVersion: bootimage.ClusterAPIGroupVersion, Resource: kind.resource, Kind: clusterAPIKind(kind.kind), Setup: register(r), Ready: ready}
		if err := clusterAPI.Add(guardedClusterAPI(clusterAPI, access, capiCache, c, r.newObject)); err != nil {
			return err
		}
	}
	return mgr.Add(clusterAPI)
}

// reconcileTimeout bounds every reconcile of every controller: one that waits on a cache that
// never syncs (a conversion webhook down, a rule revoked) gives up and is retried, rather than
// holding its worker, and with it every later pass of that controller, for ever. A reconcile
// makes a few cache reads, cloud lookups (each bounded at a minute, and shared) and writes.
const reconcileTimeout = 2 * time.Minute

// registration is how one Add names its controllers and where they log.
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
	if opts.ReconciliationTimeout == 0 {
		opts.ReconciliationTimeout = reconcileTimeout
	}
	return ctrl.NewControllerManagedBy(mgr).Named(name).WithOptions(opts)
}
