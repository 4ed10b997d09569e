// Package crdgate starts controllers once the API serves their CRDs (the operator has two gates:
// the Machine API's and Cluster API's), so the operator starts and stays ready on a cluster
// without them.
package crdgate

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// DefaultPollInterval is how often the Machine API is looked for while its CRDs are missing.
const DefaultPollInterval = 30 * time.Second

// Controller is a controller that works only while the API serves its resource.
type Controller struct {
	// Resource is what must be served, as group/version and plural name.
	GroupVersion schema.GroupVersion
	Resource     string
	// Kind names the controller's objects in messages.
	Kind string
	// Setup registers the controller with the manager.
	Setup func(ctrl.Manager) error
	// Ready, when set, must also report true before Setup runs (a feature gate that must be on,
	// read once the manager runs); it is asked at each poll.
	Ready func(context.Context) bool
}

// Gate starts each gated controller once the API serves its resource: on a cluster without the
// Machine API (the MachineAPI capability off, bare metal installs without it), the process starts
// and stays ready, runs what can run, says once what waits, and starts the rest when its CRD is
// installed, without a restart. Discovery needs no RBAC; the MCO's controller starts its boot
// image controller once, at startup (cmd/machine-config-controller/start.go).
type Gate struct {
	mgr       ctrl.Manager
	discovery discovery.DiscoveryInterface
	// changed tells the status reconciler that what runs changed.
	changed chan event.GenericEvent
	// Logger is the registration's; the context's when zero.
	Logger logr.Logger
	// Hint, when set, ends Missing's message instead of the Machine API's, and the gate waits
	// without logging (the Cluster API gate: most clusters never serve it).
	Hint string

	mu      sync.Mutex
	waiting []Controller
}

// New returns a gate of mgr's controllers that tells changed when one starts.
func New(mgr ctrl.Manager, changed chan event.GenericEvent) (*Gate, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	return &Gate{mgr: mgr, discovery: dc, changed: changed}, nil
}

// Add sets c up now when its resource is served, else when it appears.
func (g *Gate) Add(c Controller) error {
	served, err := g.served(c)
	if err != nil {
		return err
	}
	if served && c.Ready == nil {
		return c.Setup(g.mgr)
	}
	g.mu.Lock()
	g.waiting = append(g.waiting, c)
	g.mu.Unlock()
	return nil
}

// served reports whether the API serves c's resource.
func (g *Gate) served(c Controller) (bool, error) {
	list, err := g.discovery.ServerResourcesForGroupVersion(c.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", c.GroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == c.Resource {
			return true, nil
		}
	}
	return false, nil
}

// Missing describes what waits for its CRD, "" when nothing does.
func (g *Gate) Missing() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		return ""
	}
	var names []string
	for _, c := range g.waiting {
		names = append(names, fmt.Sprintf("%s (%s.%s)", c.Kind, c.Resource, c.GroupVersion.Group))
	}
	hint := g.Hint
	if hint == "" {
		hint = "is the MachineAPI capability enabled?"
	}
	return "The API serves no " + strings.Join(names, ", ") + ": boot images of these are not managed until their CRDs are installed (" + hint + ")"
}

// Retry puts c back among the waiting controllers: one that started and then stopped (its caches
// never synced: a missing RBAC rule, a CRD removed) is set up again at a later poll.
func (g *Gate) Retry(c Controller) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.ContainsFunc(g.waiting, func(w Controller) bool { return w.Kind == c.Kind }) {
		g.waiting = append(g.waiting, c)
	}
}

// Start looks for the missing resources every interval and sets up each controller whose
// resource appeared, until ctx ends (a controller may come back through Retry). A controller
// whose setup fails is logged and tried again at the next poll: it never stops the process.
func (g *Gate) Start(ctx context.Context) error {
	log := g.Logger
	if log.GetSink() == nil {
		log = logf.FromContext(ctx)
	}
	log = log.WithName("crd-gate")
	if msg := g.Missing(); msg != "" && g.Hint == "" {
		log.Info("Waiting for the Machine API", "reason", msg)
	}
	interval := DefaultPollInterval
	if i := seams.From(ctx).CRDPollInterval; i != 0 {
		interval = i
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		g.mu.Lock()
		waiting := slices.Clone(g.waiting)
		g.mu.Unlock()
		started := false
		for _, c := range waiting {
			served, err := g.served(c)
			if err != nil || !served || (c.Ready != nil && !c.Ready(ctx)) {
				continue
			}
			if err := c.Setup(g.mgr); err != nil {
				log.Error(err, "Cannot start controller, retrying", "kind", c.Kind)
				continue
			}
			log.Info("Starting controller: its CRD is served now", "kind", c.Kind)
			started = true
			g.mu.Lock()
			g.waiting = slices.DeleteFunc(g.waiting, func(w Controller) bool { return w.Kind == c.Kind })
			g.mu.Unlock()
		}
		if started {
			select {
			case g.changed <- event.GenericEvent{Object: &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kube.MachineConfigurationName}}}:
			default:
			}
		}
	}
}

// NewRESTMapper is the manager's REST mapper (ctrl.Options.MapperProvider): controller-runtime's
// dynamic mapper, which also knows MachineSet, Machine and ControlPlaneMachineSet as namespaced while the
// API does not serve them yet. The cache is limited to openshift-machine-api for them
// (controllers.CacheOptions) and must know their scope for that; nothing reads them before the Gate
// finds them served.
func NewRESTMapper(cfg *rest.Config, httpClient *http.Client) (apimeta.RESTMapper, error) {
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return machineAPIMapper{dynamic}, nil
}

type machineAPIMapper struct{ apimeta.RESTMapper }

var machineAPIResources = map[schema.GroupKind]schema.GroupVersionResource{
	{Group: machinev1beta1.GroupName, Kind: "MachineSet"}:        machinev1beta1.GroupVersion.WithResource("machinesets"),
	{Group: machinev1beta1.GroupName, Kind: "Machine"}:           machinev1beta1.GroupVersion.WithResource("machines"),
	{Group: machinev1.GroupName, Kind: "ControlPlaneMachineSet"}: machinev1.GroupVersion.WithResource("controlplanemachinesets"),
	// Cluster API, read from the Cluster API controllers' own cache of openshift-cluster-api.
	{Group: bootimage.ClusterAPIGroupVersion.Group, Kind: "MachineSet"}:        bootimage.ClusterAPIGroupVersion.WithResource("machinesets"),
	{Group: bootimage.ClusterAPIGroupVersion.Group, Kind: "MachineDeployment"}: bootimage.ClusterAPIGroupVersion.WithResource("machinedeployments"),
}

func (m machineAPIMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*apimeta.RESTMapping, error) {
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if gvr, ok := machineAPIResources[gk]; ok && apimeta.IsNoMatchError(err) && (len(versions) == 0 || slices.Contains(versions, gvr.Version)) {
		return &apimeta.RESTMapping{Resource: gvr, GroupVersionKind: gvr.GroupVersion().WithKind(gk.Kind), Scope: apimeta.RESTScopeNamespace}, nil
	}
	return mapping, err
}

// Waiting reports whether the controller of kind waits for its CRD.
func (g *Gate) Waiting(kind string) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.ContainsFunc(g.waiting, func(c Controller) bool { return c.Kind == kind })
}
