// Package controllers holds the operator's wiring (Add) and its Machine API reconcilers: the
// MachineSet and ControlPlaneMachineSet boot image reconcilers, the MachineConfiguration status
// reconciler and the feature gate reporter. The boot image steps both families share are package
// steps; the Cluster API MachineSet and MachineDeployment reconcilers, with their template copy
// collector, package capireconciler, which Add wires here. Embedders reach them only through
// controllers.AddToManager, which checks the manager first; the status writer, the CRD gates and
// the vSphere imports are packages of their own. Every boot image controller runs behind a CRD
// gate (package crdgate): the Machine API's and Cluster API's kinds, and the kinds they watch when
// served (MachineConfigPool, OSImageStream, Cluster, the Machine API twins), may come and go
// without stopping the process; the rest (MachineConfiguration, Infrastructure, FeatureGate,
// ClusterVersion, the ConfigMap and Secrets) it cannot work without.
package controllers

import (
	"context"
	"crypto/x509"
	"maps"
	"slices"
	"strings"

	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/go-logr/logr"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/capireconciler"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/crdgate"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
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

// Tracker and Metrics are the boot image steps' (package steps), named here for
// controllers.AddToManager and the tests that reach them through this package.
type (
	Tracker = steps.Tracker
	Metrics = steps.Metrics
)

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return steps.NewTracker() }

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics { return steps.NewMetrics() }

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
	reg := steps.Registration{Prefix: deps.Name, Logger: deps.Logger}
	reporter := &FeatureGateReporter{Gates: deps.Gates, Recorder: deps.Recorder, reg: reg}
	if err := reporter.SetupWithManager(mgr); err != nil {
		return err
	}
	w, err := newWiring(mgr, deps, reg)
	if err != nil {
		return err
	}
	if err := w.machineConfiguration().SetupWithManager(mgr); err != nil {
		return err
	}
	steps, err := w.bootImageSteps()
	if err != nil {
		return err
	}
	if err := w.addMachineAPI(steps); err != nil {
		return err
	}
	return w.addClusterAPI(steps)
}

// wiring is what the controllers of one Add share: the tracker of their decisions, the stream
// cache, the gates that start the Machine API and Cluster API controllers once their CRDs are
// served, and the Cluster API cache and access check.
type wiring struct {
	mgr     ctrl.Manager
	deps    Deps
	reg     steps.Registration
	tracker *Tracker
	streams *inputs.StreamCache
	// machineAPI and clusterAPI start their controllers once the CRDs are served. Cluster API has
	// its own gate, also held by ManagedBootImagesAWSCAPI (the RBAC for openshift-cluster-api
	// ships with that gate): most clusters never serve it, which is no reason to report the
	// Machine API missing.
	machineAPI, clusterAPI *crdgate.Gate
	access                 *capireconciler.ClusterAPIAccess
	capiCache              capireconciler.ClusterAPICache
	// client and capiClient read the main cache and the Cluster API cache, never waiting on an
	// informer that has not synced (crdgate.SyncedReader).
	client, capiClient client.Client
}

func newWiring(mgr ctrl.Manager, deps Deps, reg steps.Registration) (*wiring, error) {
	w := &wiring{mgr: mgr, deps: deps, reg: reg, tracker: NewTracker(), streams: &inputs.StreamCache{}}
	deps.Metrics.ExportDecisions(w.tracker)
	// The decisions' loader (steps.ClusterInputs, InPlace) lists the control-plane Nodes through it.
	if err := kube.IndexControlPlaneNodes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	var err error
	if w.machineAPI, err = crdgate.New(mgr, w.tracker.Changed); err != nil {
		return nil, err
	}
	w.machineAPI.Logger = deps.Logger
	if w.clusterAPI, err = crdgate.New(mgr, w.tracker.Changed); err != nil {
		return nil, err
	}
	w.clusterAPI.Logger, w.clusterAPI.Hint = deps.Logger, "Cluster API is not installed"
	w.access = &capireconciler.ClusterAPIAccess{Client: mgr.GetClient(), Changed: w.tracker.Changed}
	var capiClient client.Client
	if w.capiCache, capiClient, err = capireconciler.NewClusterAPICache(mgr); err != nil {
		return nil, err
	}
	gates := []*crdgate.Gate{w.machineAPI, w.clusterAPI}
	w.client = &crdgate.SyncedReader{Client: mgr.GetClient(), Cache: mgr.GetCache(), Gates: gates}
	w.capiClient = &crdgate.SyncedReader{Client: capiClient, Cache: w.capiCache, Gates: gates, All: true}
	return w, nil
}

// machineConfiguration is the status reconciler of MachineConfiguration/cluster.
func (w *wiring) machineConfiguration() *MachineConfigurationReconciler {
	mgr, deps := w.mgr, w.deps
	return &MachineConfigurationReconciler{
		Client:   w.client,
		Gates:    deps.Gates,
		Recorder: deps.Recorder,
		Metrics:  deps.Metrics,
		Migrations: migrations.Runner{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: deps.Recorder, Clock: deps.Clock,
			Migrations: migrations.All, BeforeWrite: seams.BeforeMigrationWrite,
		},
		Tracker:          w.tracker,
		Streams:          w.streams,
		Namespace:        deps.Namespace,
		MachineAPI:       w.machineAPI,
		ClusterAPI:       w.clusterAPI,
		ClusterAPIReader: w.capiClient,
		// What keeps the Cluster API controllers from running, for the status.
		ClusterAPIProblem: func() string {
			return strings.Join(slices.DeleteFunc([]string{w.access.Problem(), w.clusterAPI.Stopped()}, func(s string) bool { return s == "" }), "; ")
		},
		Lacking: func() []string {
			lacking := append(w.machineAPI.Lacking(), w.clusterAPI.Lacking()...)
			if stopped := w.machineAPI.Stopped(); stopped != "" {
				lacking = append(lacking, stopped)
			}
			return slices.Compact(slices.Sorted(slices.Values(lacking)))
		},
		Status: &status.Writer{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: deps.Recorder, Clock: deps.Clock, ClusterOperator: deps.ClusterOperator,
			ContestedWrites: deps.ContestedWrites,
		},
		ClusterOperator: deps.ClusterOperator,
		reg:             w.reg,
		counts:          status.CountsHold{Clock: deps.Clock},
	}
}

// bootImageSteps are what every boot image reconciler shares: the cluster's inputs with its clouds
// (deps.Images, else the cluster's own, and vCenter), the tracker and the vSphere imports.
func (w *wiring) bootImageSteps() (steps.BootImages, error) {
	mgr, deps := w.mgr, w.deps
	images := deps.Images
	if images == nil {
		images = kube.Clouds(mgr.GetClient(), deps.CloudRootCAs, cloud.Backoff{}, deps.Metrics, deps.GCP)
	}
	vcenters, templates, err := vsphereimport.Setup(mgr, deps.CloudRootCAs, deps.OVACacheDir)
	if err != nil {
		return steps.BootImages{}, err
	}
	clouds := bootimage.Clouds{}
	maps.Copy(clouds, images)
	if vcenters != nil {
		clouds[configv1.VSpherePlatformType] = vcenters
	}
	inputs := steps.ClusterInputs{Client: w.client, Gates: deps.Gates, Clouds: clouds, Streams: w.streams, Namespace: deps.Namespace}
	return steps.BootImages{
		Client: w.client, Reader: mgr.GetAPIReader(), Inputs: inputs, Recorder: deps.Recorder, Tracker: w.tracker,
		Metrics: deps.Metrics, Clock: deps.Clock, Templates: templates, Registration: w.reg, AMICopies: &steps.CopyLog{},
	}, nil
}

// addMachineAPI adds the MachineSet and ControlPlaneMachineSet controllers, run while their
// CRDs are served.
func (w *wiring) addMachineAPI(bootImages steps.BootImages) error {
	// The informer of a kind gone goes too: it would list in vain. Otherwise it stays, with its
	// indexes and the other controllers' handlers (a Cluster API controller maps twins).
	drop := func(obj client.Object) func(context.Context, bool) {
		return func(ctx context.Context, gone bool) {
			if gone {
				_ = w.mgr.GetCache().RemoveInformer(ctx, obj)
			}
		}
	}
	if err := w.machineAPI.Add(crdgate.Controller{GroupVersion: machinev1beta1.GroupVersion, Resource: "machinesets", Kind: bootimage.KindMachineSet,
		Setup: register(&MachineSetReconciler{bootImages}), Stopped: drop(&machinev1beta1.MachineSet{})}); err != nil {
		return err
	}
	if err := w.machineAPI.Add(crdgate.Controller{GroupVersion: machinev1.GroupVersion, Resource: "controlplanemachinesets", Kind: cpmsKind,
		Setup: register(&ControlPlaneMachineSetReconciler{bootImages}), Stopped: drop(&machinev1.ControlPlaneMachineSet{})}); err != nil {
		return err
	}
	return w.mgr.Add(w.machineAPI)
}

// addClusterAPI adds the Cluster API MachineSet and MachineDeployment controllers, run while
// their CRDs are served, gate ManagedBootImagesAWSCAPI is on and the identity may read what they
// watch (asked again at each poll of the gate), and never fatal: one that stops (its kind gone,
// a rule revoked, caches that cannot sync) is reported and started again once it can run.
func (w *wiring) addClusterAPI(bootImages steps.BootImages) error {
	ready := func(ctx context.Context) bool {
		g, err := w.deps.Gates.Current(ctx)
		return err == nil && g.Enabled(featuregates.ManagedBootImagesAWSCAPI) && w.access.Allowed(ctx)
	}
	copies := &capireconciler.TemplateCollector{Reader: w.capiClient, Writer: w.mgr.GetClient(), Mapper: w.mgr.GetRESTMapper(), Clock: w.deps.Clock}
	signal := &capireconciler.CanarySignal{}
	for _, kind := range []struct{ kind, resource string }{{bootimage.KindMachineSet, "machinesets"}, {bootimage.KindMachineDeployment, "machinedeployments"}} {
		r := &capireconciler.ClusterAPIReconciler{BootImages: bootImages, Kind: kind.kind, MachineAPI: w.machineAPI, Cache: w.capiCache, CAPI: w.capiClient, Copies: copies,
			ClusterAPI: w.clusterAPI, Signal: signal}
		c := crdgate.Controller{GroupVersion: clusterapi.GroupVersion, Resource: kind.resource, Kind: capireconciler.ClusterAPIKind(kind.kind), Setup: register(r), Ready: ready,
			// Its informer goes with it: one that never synced would be read again.
			Stopped: func(ctx context.Context, _ bool) { _ = w.capiCache.RemoveInformer(ctx, r.NewObject()) }}
		if err := w.clusterAPI.Add(c); err != nil {
			return err
		}
	}
	return w.mgr.Add(w.clusterAPI)
}

// register is the setup of a reconciler that a gate runs once its CRDs are served.
func register(r interface {
	Register(context.Context, ctrl.Manager) error
}) func(ctrl.Manager) error {
	return func(mgr ctrl.Manager) error { return r.Register(context.Background(), mgr) }
}
