// Package controllers embeds the boot image controllers in another process's controller-runtime
// manager: the standalone cmd/bootimage-operator, or the MCO's machine-config-controller.
//
//	opts := controllers.ManagerOptions()      // scheme and cache restrictions
//	opts.LeaderElection = false            // the embedder's own election already holds
//	mgr, err := ctrl.NewManager(cfg, opts)
//	err = controllers.AddToManager(mgr, controllers.Options{Logger: log, FeatureGates: gates})
//
// Inside the machine-config-controller, import it under another name (docs/embedding.md uses
// bootimageoperator): the MCC's run has a local controllers. NewScheme gives an embedder's tests
// the operator's types. Nothing is registered or set at import time.
package controllers

import (
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	reconcilers "github.com/bootimage-operator/bootimage-operator/internal/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/crdgate"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// Options are what the embedder gives the operator. Every field is optional.
type Options struct {
	// Logger is where the controllers log. Default: the manager's logger (ctrl.Options.Logger).
	Logger logr.Logger
	// Metrics is where the operator's metrics are registered. Default: controller-runtime's
	// registry, which the manager's metrics server serves.
	Metrics prometheus.Registerer
	// FeatureGates gives the gates in force. Default: FeatureGate/cluster read live for
	// ReleaseVersion. Inside the MCO pass StaticFeatureGates(ctrlctx.FeatureGatesHandler, version)
	// or FeatureGateAccess(featureGateAccessor, version).
	FeatureGates FeatureGates
	// ReleaseVersion is the release whose gates apply: the running release (the MCO's
	// version.ReleaseVersion, $RELEASE_VERSION). Empty falls back to ClusterVersion/version
	// status.desired.version, which during an upgrade is the target release, as library-go's
	// FeatureGateAccess does for a missing version.
	ReleaseVersion string
	// Recorder records the operator's Events. Default: the manager's core/v1 recorder for
	// "bootimage-operator".
	Recorder record.EventRecorder
	// Clock stamps annotations and times retries. Default: the real clock.
	Clock clock.PassiveClock
	// Namespace holds the coreos-bootimages ConfigMap. Default: openshift-machine-config-operator.
	// The manager's cache must hold ConfigMaps of exactly that namespace (CacheOptions).
	Namespace string
	// Name prefixes the controller names ("<Name>-machineset"), so that two registrations can
	// share a process (tests). Default: none, the names the alerts and dashboards know.
	Name string
	// GCP links the GCP image lookups: pass gcpcloud.New (package bootimage/cloud/gcpcloud, the
	// one implementation of gcp.NewImages; the type stays in bootimage/gcp, beside the Images and
	// Settings it is made of, so that naming it links no SDK). Default: none, and GCP MachineSets
	// are decided by the image prefix rule alone (as without credentials); the Google Cloud SDK
	// is then not linked.
	GCP gcp.NewImages
	// Images replaces the AWS and GCP image lookups altogether, by platform (a static catalogue,
	// tests); vCenter is read as without it.
	Images bootimage.Clouds
	// CloudRootCAs, when set, are the only CAs trusted for cloud endpoints.
	CloudRootCAs *x509.CertPool
	// OVACacheDir is the writable directory for downloaded vSphere OVAs.
	// Default: /var/cache/bootimage-operator.
	OVACacheDir string
	// ClusterOperator, when set, names the ClusterOperator whose Upgradeable condition carries
	// the boot image skew guard. Inside the MCO leave it empty: its status sync reads the guard.
	ClusterOperator string
	// ContestedWrites is how many status writes an hour the operator allows itself while a second
	// writer rewrites its status fields. Default: 3 (status.DefaultContestedWrites).
	ContestedWrites int
}

// FeatureGates gives the feature gates in force; an error means they are unknown, and gated
// controllers hold. The live reader (kube.GateSource) and the adapters StaticFeatureGates and
// FeatureGateAccess satisfy it.
type FeatureGates = featuregates.Reader

// FeatureGateSet is one release's gates: library-go's featuregates.FeatureGate and the MCO's
// ctrlcommon.FeatureGatesHandler satisfy it.
type FeatureGateSet = featuregates.Set

// StaticFeatureGates gives set's gates, labelled version, for as long as the process runs: the
// MCO's FeatureGatesHandler, connected before controllers start (the MCO restarts when the gates
// change). A gate set does not know takes the operator's compiled-in default.
func StaticFeatureGates(set FeatureGateSet, version string) FeatureGates {
	return featuregates.Static{Version: version, Set: set}
}

// FeatureGateAccess adapts library-go's featuregates.FeatureGateAccess without this module
// importing library-go: FeatureGateAccess(accessor, version). Gates are unknown (controllers
// hold) until the accessor has observed them.
func FeatureGateAccess[G FeatureGateSet](access interface{ CurrentFeatureGates() (G, error) }, version string) FeatureGates {
	return featuregates.FromAccess(access, version)
}

// AddToScheme adds the types the operator reads and writes to s.
func AddToScheme(s *runtime.Scheme) error { return kube.AddToScheme(s) }

// NewScheme returns a new scheme holding the types of AddToScheme: client-go's and openshift/api's
// config, operator, machine and machineconfiguration groups. It is ManagerOptions' scheme, and
// what an embedder's tests give their clients to read what the operator writes.
func NewScheme() *runtime.Scheme { return kube.NewScheme() }

// ManagerOptions returns manager options with what the operator needs: its scheme, a REST mapper
// that starts without the Machine API, and a cache
// holding MachineSets, Machines, the ControlPlaneMachineSet and Secrets of openshift-machine-api and
// ConfigMaps of openshift-machine-config-operator only, which is all the shipped RBAC lets it
// list. Set the rest (metrics, probes, leader election) before ctrl.NewManager. A caller with
// its own scheme replaces Scheme after AddToScheme on it.
func ManagerOptions() ctrl.Options {
	return ctrl.Options{
		Scheme: NewScheme(), Cache: CacheOptions(kube.MCONamespace), NewCache: NewCache(nil),
		// Knows the scope of the Machine API types before they are served, so the manager starts
		// on a cluster without them.
		MapperProvider: crdgate.NewRESTMapper,
	}
}

// CacheOptions are the cache restrictions of ManagerOptions with the coreos-bootimages ConfigMap
// in namespace (Options.Namespace): the namespaces the controllers read, which are also all the
// shipped RBAC allows. Use them with NewCache.
func CacheOptions(namespace string) cache.Options {
	machineAPI := map[string]cache.Config{kube.MachineAPINamespace: {}}
	return cache.Options{
		// Nothing reads managedFields from the cache; on a thousand MachineSets they are most of
		// what it would hold.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&machinev1beta1.MachineSet{}:        {Namespaces: machineAPI},
			&machinev1beta1.Machine{}:           {Namespaces: machineAPI},
			&machinev1.ControlPlaneMachineSet{}: {Namespaces: machineAPI},
			&corev1.Secret{}:                    {Namespaces: machineAPI},
			&corev1.ConfigMap{}:                 {Namespaces: map[string]cache.Config{namespace: {}}},
		}}
}

// NewCache wraps newCache (cache.New when nil) so that AddToManager can check the options the
// manager's cache was built with; AddToManager refuses a cache it cannot check.
func NewCache(newCache cache.NewCacheFunc) cache.NewCacheFunc {
	if newCache == nil {
		newCache = cache.New
	}
	return func(config *rest.Config, opts cache.Options) (cache.Cache, error) {
		c, err := newCache(config, opts)
		if err != nil {
			return nil, err
		}
		return &checkedCache{Cache: c, opts: opts}, nil
	}
}

// checkedCache remembers the options a cache was built with.
type checkedCache struct {
	cache.Cache
	opts cache.Options
}

// AddToManager registers the operator's controllers and metrics with mgr. It first checks that
// mgr can serve them, and names everything missing: types absent from the scheme, a cache not
// restricted to the namespaces the shipped RBAC allows (a cluster-wide cache of MachineSets or
// Secrets would never sync under it). Leader election is the manager's: the controllers run only
// while it leads, if it elects.
func AddToManager(mgr ctrl.Manager, opts Options) error {
	if opts.Namespace == "" {
		opts.Namespace = kube.MCONamespace
	}
	if err := Check(mgr, opts.Namespace); err != nil {
		return err
	}
	if opts.ContestedWrites < 0 {
		return fmt.Errorf("ContestedWrites is %d: give a positive number of status writes an hour, or 0 for the default", opts.ContestedWrites)
	}
	metrics := reconcilers.NewMetrics()
	registry := opts.Metrics
	if registry == nil {
		registry = crmetrics.Registry
	}
	for _, c := range metrics.Collectors() {
		if err := registry.Register(c); err != nil {
			return fmt.Errorf("registering the boot image metrics: %w (one registration per registry: pass Options.Metrics)", err)
		}
	}
	deps := reconcilers.Deps{
		Name:            opts.Name,
		Logger:          opts.Logger,
		Gates:           opts.FeatureGates,
		Recorder:        opts.Recorder,
		Clock:           opts.Clock,
		Metrics:         metrics,
		Images:          opts.Images,
		GCP:             opts.GCP,
		CloudRootCAs:    opts.CloudRootCAs,
		OVACacheDir:     opts.OVACacheDir,
		ClusterOperator: opts.ClusterOperator,
		Namespace:       opts.Namespace,
		ContestedWrites: opts.ContestedWrites,
	}
	if deps.Logger.GetSink() == nil {
		deps.Logger = mgr.GetLogger()
	}
	if deps.Gates == nil {
		deps.Gates = kube.GateSource{Reader: mgr.GetClient(), ReleaseVersion: opts.ReleaseVersion}
	}
	if deps.Recorder == nil {
		deps.Recorder = reconcilers.EventRecorder(mgr)
	}
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	return reconcilers.Add(mgr, deps)
}

// needed are the types the operator reads and writes; namespaced ones list only the namespace
// given ("" for the Options.Namespace).
var needed = []struct {
	obj       client.Object
	namespace string
	cached    bool
}{
	{&machinev1beta1.MachineSet{}, kube.MachineAPINamespace, true},
	{&machinev1beta1.Machine{}, kube.MachineAPINamespace, true},
	{&machinev1.ControlPlaneMachineSet{}, kube.MachineAPINamespace, true},
	{&corev1.Secret{}, kube.MachineAPINamespace, true},
	{&corev1.ConfigMap{}, "", true},
	{&operatorv1.MachineConfiguration{}, "", false},
	{&configv1.FeatureGate{}, "", false},
	{&configv1.ClusterVersion{}, "", false},
	{&configv1.Infrastructure{}, "", false},
	{&configv1.ClusterOperator{}, "", false},
	{&corev1.Node{}, "", false},
}

// Check reports what mgr lacks to run the operator with the coreos-bootimages ConfigMap in
// namespace, all of it in one error; nil when nothing.
func Check(mgr ctrl.Manager, namespace string) error {
	var problems []string
	scheme := mgr.GetScheme()
	gvks := map[schema.GroupVersionKind]string{}
	for _, n := range needed {
		gvk, err := apiutil.GVKForObject(n.obj, scheme)
		if err != nil {
			problems = append(problems, fmt.Sprintf("the scheme has no %T (controllers.AddToScheme adds it)", n.obj))
			continue
		}
		ns := n.namespace
		if ns == "" {
			ns = namespace
		}
		if n.cached {
			gvks[gvk] = ns
		}
	}
	checked, ok := mgr.GetCache().(*checkedCache)
	if !ok {
		problems = append(problems, "the cache was not built with controllers.NewCache, so its namespaces cannot be checked: "+
			"build the manager from controllers.ManagerOptions() (its Cache and NewCache)")
	} else {
		problems = append(problems, cacheProblems(checked.opts, scheme, gvks)...)
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New("the manager cannot run the boot image controllers: " + strings.Join(problems, "; "))
}

// cacheProblems checks that the cache lists each kind of want in exactly its namespace, unfiltered:
// wider, the shipped RBAC never lets it sync; narrower or filtered, objects go unseen.
func cacheProblems(opts cache.Options, scheme *runtime.Scheme, want map[schema.GroupVersionKind]string) []string {
	byGVK := map[schema.GroupVersionKind]cache.ByObject{}
	for obj, by := range opts.ByObject {
		if gvk, err := apiutil.GVKForObject(obj, scheme); err == nil {
			byGVK[gvk] = by
		}
	}
	var problems []string
	if opts.DefaultLabelSelector != nil && !opts.DefaultLabelSelector.Empty() {
		problems = append(problems, fmt.Sprintf("the cache filters every kind by labels %q: the operator must see all of them", opts.DefaultLabelSelector))
	}
	if opts.DefaultFieldSelector != nil && !opts.DefaultFieldSelector.Empty() {
		problems = append(problems, fmt.Sprintf("the cache filters every kind by fields %q: the operator must see all of them", opts.DefaultFieldSelector))
	}
	kinds := slices.SortedFunc(maps.Keys(want), func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	for _, gvk := range kinds {
		ns := want[gvk]
		by, hasBy := byGVK[gvk]
		namespaces := opts.DefaultNamespaces
		if hasBy && by.Namespaces != nil {
			namespaces = by.Namespaces
		}
		kind := gvk.Kind + "s"
		switch got := slices.Sorted(maps.Keys(namespaces)); {
		case len(got) == 0 || slices.Contains(got, cache.AllNamespaces):
			problems = append(problems, fmt.Sprintf("the cache lists %s in all namespaces, which the shipped RBAC forbids (it never syncs): restrict them to %s", kind, ns))
		case len(got) != 1 || got[0] != ns:
			problems = append(problems, fmt.Sprintf("the cache lists %s in %s: the operator needs exactly %s", kind, strings.Join(got, ", "), ns))
		}
		filtered := hasBy && ((by.Label != nil && !by.Label.Empty()) || (by.Field != nil && !by.Field.Empty()))
		for _, c := range namespaces {
			filtered = filtered || (c.LabelSelector != nil && !c.LabelSelector.Empty()) || (c.FieldSelector != nil && !c.FieldSelector.Empty())
		}
		if filtered {
			problems = append(problems, fmt.Sprintf("the cache filters %s by label or field: the operator must see all of them", kind))
		}
	}
	return problems
}
