// Package crdgate runs the controllers that need kinds the API may not serve: the Machine API's
// and Cluster API's (a gate each), and every kind they watch only when it is served
// (MachineConfigPool, OSImageStream, the Machine API MachineSets a Cluster API controller maps
// to their twins). A controller runs in a scope of its own, so the gate can stop it, with its
// event handlers, queue and sweeps, when its kind goes, when Ready turns false (the Cluster API
// rules revoked) or when its caches never sync, and start it again, without a restart, once it
// can run. What waits or stopped is said once, in the log and through Missing, Lacking and
// Stopped; nothing here ever stops the process.
package crdgate

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// DefaultPollInterval is how often the gate looks at what the API serves and what may run.
const DefaultPollInterval = 30 * time.Second

// Controller is a controller that works only while the API serves its resource.
type Controller struct {
	// Resource is what must be served, as group/version and plural name.
	GroupVersion schema.GroupVersion
	Resource     string
	// Kind names the controller's objects in messages.
	Kind string
	// Setup registers the controller with the manager it is given (one scoped to this run of it).
	Setup func(ctrl.Manager) error
	// Ready, when set, must also report true for the controller to run (a feature gate on, its
	// rules held); it is asked at each poll, also while it runs: false stops it.
	Ready func(context.Context) bool
	// Stopped, when set, runs after each stop (to drop informers that would list in vain); gone
	// says its CRD is no longer served.
	Stopped func(ctx context.Context, gone bool)
}

// Optional is a kind a controller watches while the API serves it and does without otherwise
// (Watch): its coming or going restarts the controller, with or without the watch.
type Optional struct {
	GroupVersion   schema.GroupVersion
	Resource, Kind string
	// Without says what the controllers do without it, for Lacking; "" for a kind whose absence
	// is normal (OSImageStream before 5.0): nothing is said.
	Without string
}

func (o Optional) resource() schema.GroupVersionResource {
	return o.GroupVersion.WithResource(o.Resource)
}

// Gate runs each of its controllers while the API serves its resource and Ready says it may: on
// a cluster without the Machine API (the MachineAPI capability off) or Cluster API, the process
// starts and stays ready, runs what can run, says once what waits, and starts the rest when
// it can, without a restart. Discovery needs no RBAC.
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

	mu          sync.Mutex
	controllers []*gated
	// served is what the API served at the last look, by resource.
	served map[schema.GroupVersionResource]bool
}

// gated is one controller of the gate and its current run.
type gated struct {
	Controller
	// stop ends the current run; nil while the controller waits.
	stop context.CancelFunc
	// optional are the optional kinds its current run asked for, and whether each was served.
	optional map[Optional]bool
	// stopped says why a run that had started stopped; "" once it runs again.
	stopped string
	// failed says why the last run failed (its caches never synced); kept until a run outlives
	// the cache sync timeout, so a run that fails again does not unsay and say it each time.
	failed string
	// started is when the current run started.
	started time.Time
}

// New returns a gate of mgr's controllers that tells changed when what runs changes.
func New(mgr ctrl.Manager, changed chan event.GenericEvent) (*Gate, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	return &Gate{mgr: mgr, discovery: dc, changed: changed, served: map[schema.GroupVersionResource]bool{}}, nil
}

// Add sets c up now when its resource is served and it needs no Ready, else at a later poll.
func (g *Gate) Add(c Controller) error {
	gc := &gated{Controller: c}
	g.mu.Lock()
	g.controllers = append(g.controllers, gc)
	g.mu.Unlock()
	served, err := g.servedNow(c.GroupVersion.WithResource(c.Resource))
	if err != nil {
		return err
	}
	if served && c.Ready == nil {
		return g.start(gc)
	}
	return nil
}

// servedNow asks discovery whether the API serves gvr, and remembers the answer.
func (g *Gate) servedNow(gvr schema.GroupVersionResource) (bool, error) {
	list, err := g.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	served := false
	if apierrors.IsNotFound(err) {
		err = nil
	} else if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gvr.GroupVersion(), err)
	} else {
		served = slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource })
	}
	g.mu.Lock()
	g.served[gvr] = served
	g.mu.Unlock()
	return served, nil
}

// Served says whether the gate follows gvr (a controller's resource or an optional kind one
// watches) and whether the API served it at the last look.
func (g *Gate) Served(gvr schema.GroupVersionResource) (followed, served bool) {
	if g == nil {
		return false, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	served, followed = g.served[gvr]
	return followed, served
}

// Missing describes what waits for its CRD, "" when nothing does.
func (g *Gate) Missing() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var names []string
	for _, c := range g.controllers {
		// One that is served but waits (Ready, a failed start) says so in Stopped or elsewhere.
		if served, seen := g.served[c.GroupVersion.WithResource(c.Resource)]; c.stop == nil && (!served || !seen) {
			names = append(names, fmt.Sprintf("%s (%s.%s)", c.Kind, c.Resource, c.GroupVersion.Group))
		}
	}
	if len(names) == 0 {
		return ""
	}
	hint := g.Hint
	if hint == "" {
		hint = "is the MachineAPI capability enabled?"
	}
	return "The API serves no " + strings.Join(names, ", ") + ": boot images of these are not managed until their CRDs are installed (" + hint + ")"
}

// Lacking says which optional kinds the running controllers do without, and what that means;
// "" when none.
func (g *Gate) Lacking() []string {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range g.controllers {
		for o, served := range c.optional {
			if c.stop != nil && !served && o.Without != "" {
				seen[fmt.Sprintf("The API serves no %s (%s.%s): %s", o.Kind, o.Resource, o.GroupVersion.Group, o.Without)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Stopped says why controllers stopped, "" when none did: a run that failed (said until a later
// run outlives the cache sync timeout), or one that ran and waits to run again. Without a Hint,
// those whose CRD went are Missing's to say, not its.
func (g *Gate) Stopped() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, c := range g.controllers {
		served := g.served[c.GroupVersion.WithResource(c.Resource)]
		switch {
		case c.failed != "":
			out = append(out, c.failed)
		case c.stop == nil && c.stopped != "" && (served || g.Hint != ""):
			out = append(out, c.stopped)
		}
	}
	return strings.Join(out, "; ")
}

// Waiting reports whether the controller of kind does not run.
func (g *Gate) Waiting(kind string) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.ContainsFunc(g.controllers, func(c *gated) bool { return c.Kind == kind && c.stop == nil })
}

// Start looks, every interval until ctx ends, at what the API serves and what may run: it starts
// each waiting controller that can run and stops each running one that no longer can (its
// resource gone, Ready false) or whose optional kinds came or went, to start it again.
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
			g.mu.Lock()
			for _, c := range g.controllers {
				if c.stop != nil {
					c.stop()
				}
			}
			g.mu.Unlock()
			return nil
		case <-ticker.C:
		}
		g.poll(ctx, log)
	}
}

// poll checks each controller once.
func (g *Gate) poll(ctx context.Context, log logr.Logger) {
	g.mu.Lock()
	controllers := slices.Clone(g.controllers)
	g.mu.Unlock()
	look := map[schema.GroupVersionResource]bool{}
	served := func(gvr schema.GroupVersionResource) (bool, error) {
		if s, ok := look[gvr]; ok {
			return s, nil
		}
		s, err := g.servedNow(gvr)
		if err == nil {
			look[gvr] = s
		}
		return s, err
	}
	changed := false
	for _, c := range controllers {
		if g.check(ctx, log, c, served) {
			changed = true
		}
	}
	if changed {
		g.notify()
	}
}

// check starts or stops c as what the API serves and Ready say, and reports whether it did.
func (g *Gate) check(ctx context.Context, log logr.Logger, c *gated, served func(schema.GroupVersionResource) (bool, error)) bool {
	own := c.GroupVersion.WithResource(c.Resource)
	ok, err := served(own)
	if err != nil {
		// Discovery failing says nothing of the CRD: keep things as they are.
		return false
	}
	g.mu.Lock()
	running, optional := c.stop != nil, c.optional
	g.mu.Unlock()
	if running && !ok {
		log.Info("Stopping controller: its CRD is no longer served", "kind", c.Kind, "resource", own.String())
		g.halt(ctx, c, true, fmt.Sprintf("The %s controller stopped: the API no longer serves %s.%s; it starts again once it does", c.Kind, c.Resource, c.GroupVersion.Group))
		return true
	}
	ready := ok && (c.Ready == nil || c.Ready(ctx))
	if running && !ready {
		// What stops it now says why (Ready's own report): an earlier failure is past.
		g.mu.Lock()
		c.failed = ""
		g.mu.Unlock()
		log.Info("Stopping controller: it may no longer run", "kind", c.Kind)
		g.halt(ctx, c, false, "")
		return true
	}
	if running && g.outlived(c) {
		return true
	}
	if running {
		var came, went []string
		for o, was := range optional {
			if now, err := served(o.resource()); err == nil && now != was {
				if now {
					came = append(came, o.Kind)
				} else {
					went = append(went, o.Kind)
					g.dropInformer(ctx, o)
				}
			}
		}
		if len(came)+len(went) == 0 {
			return false
		}
		log.Info("Restarting controller: kinds it watches when served came or went", "kind", c.Kind, "served", came, "gone", went)
		g.halt(ctx, c, false, "")
	}
	if !ready {
		return false
	}
	if err := g.start(c); err != nil {
		log.Error(err, "Cannot start controller, retrying", "kind", c.Kind)
		return false
	}
	log.Info("Starting controller: its CRD is served", "kind", c.Kind)
	return true
}

// outlived clears the failure of c's earlier run once the current one has lived past the cache
// sync timeout (its caches synced), and reports whether it did.
func (g *Gate) outlived(c *gated) bool {
	timeout := g.mgr.GetControllerOptions().CacheSyncTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute // controller-runtime's default
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.failed == "" || time.Since(c.started) <= timeout {
		return false
	}
	c.failed = ""
	return true
}

// dropInformer removes the main cache's informer of an optional kind no longer served: it would
// list it in vain for ever.
func (g *Gate) dropInformer(ctx context.Context, o Optional) {
	obj, err := g.mgr.GetScheme().New(o.GroupVersion.WithKind(o.Kind))
	if cobj, ok := obj.(client.Object); err == nil && ok {
		_ = g.mgr.GetCache().RemoveInformer(ctx, cobj)
	}
}

// start sets c up in a scope of its own.
func (g *Gate) start(c *gated) error {
	scope, stop := context.WithCancel(context.Background())
	g.mu.Lock()
	c.stop, c.optional, c.stopped, c.started = stop, map[Optional]bool{}, "", time.Now()
	g.mu.Unlock()
	if err := c.Setup(scoped{Manager: g.mgr, scope: scope, gate: g, c: c}); err != nil {
		g.mu.Lock()
		c.stop = nil
		g.mu.Unlock()
		stop()
		return err
	}
	return nil
}

// halt ends c's current run, if any, saying why when why is set; gone says its CRD went.
func (g *Gate) halt(ctx context.Context, c *gated, gone bool, why string) {
	g.mu.Lock()
	stop := c.stop
	c.stop = nil
	if why != "" {
		c.stopped, c.failed = why, ""
	}
	g.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	if c.Stopped != nil {
		c.Stopped(ctx, gone)
	}
}

// failed records that c's run stopped with err (its caches never synced): it starts again at a
// later poll.
func (g *Gate) failed(ctx context.Context, c *gated, scope context.Context, err error) {
	g.mu.Lock()
	current := c.stop != nil
	g.mu.Unlock()
	if !current || scope.Err() != nil {
		return
	}
	msg := fmt.Sprintf("The %s controller stopped and is retried: %v", c.Kind, err)
	if strings.Contains(err.Error(), "caches to sync") {
		// controller-runtime names whichever source it waited on when time ran out: the same
		// fault would read as a new one at each retry.
		msg = fmt.Sprintf("The %s controller stopped and is retried: its caches did not sync (a list that fails: a conversion webhook down, a rule revoked)", c.Kind)
	}
	g.mu.Lock()
	again := c.failed == msg
	c.failed = msg
	g.mu.Unlock()
	if !again {
		logf.FromContext(ctx).Error(err, "Controller stopped; it is started again at the next poll", "kind", c.Kind)
	}
	g.halt(ctx, c, false, "")
	g.notify()
}

func (g *Gate) notify() {
	select {
	case g.changed <- event.GenericEvent{Object: &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kube.MachineConfigurationName}}}:
	default:
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
	{Group: clusterapi.GroupVersion.Group, Kind: "MachineSet"}:        clusterapi.GroupVersion.WithResource("machinesets"),
	{Group: clusterapi.GroupVersion.Group, Kind: "MachineDeployment"}: clusterapi.GroupVersion.WithResource("machinedeployments"),
}

func (m machineAPIMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*apimeta.RESTMapping, error) {
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if gvr, ok := machineAPIResources[gk]; ok && apimeta.IsNoMatchError(err) && (len(versions) == 0 || slices.Contains(versions, gvr.Version)) {
		return &apimeta.RESTMapping{Resource: gvr, GroupVersionKind: gvr.GroupVersion().WithKind(gk.Kind), Scope: apimeta.RESTScopeNamespace}, nil
	}
	return mapping, err
}
