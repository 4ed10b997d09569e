package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	intstrutil "k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/render"
)

// LivePlan is what applying or deleting one MachineConfig would do to the pools that render it.
type LivePlan struct {
	MachineConfig string `json:"machineConfig"`
	// Operation is apply or delete.
	Operation string     `json:"operation"`
	Pools     []PoolPlan `json:"pools"`
	// Message says why no pool is affected.
	Message string `json:"message,omitempty"`
}

// PoolPlan is the decision for one MachineConfigPool: the file mode's outcome, actions and
// changes, with the pool's rollout.
type PoolPlan struct {
	Pool string `json:"pool"`
	// RenderedConfig is the pool's current rendered config, the one the decision starts from.
	RenderedConfig string `json:"renderedConfig"`
	Paused         bool   `json:"paused"`
	// MachineCount nodes are updated, MaxUnavailable at a time.
	MachineCount   int32 `json:"machineCount"`
	MaxUnavailable int   `json:"maxUnavailable"`
	refresh.Result
	Notes []string `json:"notes,omitempty"`
}

// poolChange is the MachineConfigs to apply, all together as `oc apply -f` applies a file, or
// the name of one to delete.
type poolChange struct {
	deleted string
	apply   []*mcfgv1.MachineConfig
}

// names are the names of the MachineConfigs the change replaces or deletes.
func (c poolChange) names() []string {
	if c.apply == nil {
		return []string{c.deleted}
	}
	names := make([]string, len(c.apply))
	for i, mc := range c.apply {
		names[i] = mc.Name
	}
	return names
}

// controllerConfig is the MCO's ControllerConfig, read only for its base OS image.
var controllerConfig = schema.GroupVersionKind{Group: "machineconfiguration.openshift.io", Version: "v1", Kind: "ControllerConfig"}

// runRefreshPlanLive is `bootimagectl refresh plan -f|--delete`: it previews a MachineConfig on
// the pools of a cluster, reading only.
func runRefreshPlanLive(ctx context.Context, o refreshPlanOptions, cluster *clusterFlags, stdout io.Writer) error {
	scheme := liveScheme()
	change := poolChange{deleted: o.deleted}
	if o.file != "" {
		mcs, err := readMachineConfigs(scheme, &input{stdin: o.stdin}, o.file)
		if err != nil {
			return unusable("%v", err)
		}
		change = poolChange{apply: mcs}
	}
	cfg, err := cluster.restConfig()
	if err != nil {
		return unusable("%v", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return unusable("%v", err)
	}
	p, err := planLive(ctx, c, change, o.pool)
	if err != nil {
		return unusable("%v", err)
	}
	if err := printLivePlan(stdout, p, o.output); err != nil {
		return unusable("%v", err)
	}
	outcomes := make([]refresh.Outcome, len(p.Pools))
	for i, pp := range p.Pools {
		outcomes[i] = pp.Outcome
	}
	return outcomeExit(o.exitCode, outcomes...)
}

func liveScheme() *runtime.Scheme {
	s := kube.NewScheme()
	utilruntime.Must(mcfgv1.Install(s))
	return s
}

// readMachineConfigs decodes every document of path ("-": stdin) strictly, so a misspelt or
// mistyped field is named, and checks each as the MCO does before rendering.
func readMachineConfigs(scheme *runtime.Scheme, in *input, path string) ([]*mcfgv1.MachineConfig, error) {
	name, data, err := in.read("-f", path)
	if err != nil {
		return nil, err
	}
	docs, err := documents(name, data)
	if err != nil {
		return nil, err
	}
	var mcs []*mcfgv1.MachineConfig
	seen := map[string]int{}
	for n, doc := range docs {
		where := name
		if len(docs) > 1 {
			where = fmt.Sprintf("%s document %d", name, n+1)
		}
		mc, err := decodeMachineConfig(scheme, where, doc)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[mc.Name]; dup {
			return nil, fmt.Errorf("%s: MachineConfig %s is in documents %d and %d: give it once", name, mc.Name, first, n+1)
		}
		seen[mc.Name] = n + 1
		mcs = append(mcs, mc)
	}
	if len(mcs) == 0 {
		return nil, fmt.Errorf("%s: no MachineConfig in it", name)
	}
	return mcs, nil
}

// decodeMachineConfig decodes data, read from path, as readMachineConfigs does.
func decodeMachineConfig(scheme *runtime.Scheme, path string, data []byte) (*mcfgv1.MachineConfig, error) {
	decoder := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
	obj, gvk, err := decoder.Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	mc, ok := obj.(*mcfgv1.MachineConfig)
	if !ok {
		return nil, fmt.Errorf("%s: a %s, not a machineconfiguration.openshift.io/v1 MachineConfig", path, gvk.Kind)
	}
	if mc.Name == "" {
		return nil, fmt.Errorf("%s: metadata.name is empty", path)
	}
	if err := render.Validate(mc); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return mc, nil
}

// planLive reads the cluster and decides change for every pool it affects (only onlyPool when set).
func planLive(ctx context.Context, c client.Reader, change poolChange, onlyPool string) (LivePlan, error) {
	plan := LivePlan{MachineConfig: strings.Join(change.names(), ", "), Operation: "apply", Pools: []PoolPlan{}}
	var mcs mcfgv1.MachineConfigList
	if err := c.List(ctx, &mcs); err != nil {
		return plan, fmt.Errorf("listing MachineConfigs: %v", err)
	}
	replaced := map[string]*mcfgv1.MachineConfig{}
	for _, name := range change.names() {
		replaced[name] = nil
	}
	for i := range mcs.Items {
		if _, ok := replaced[mcs.Items[i].Name]; ok {
			replaced[mcs.Items[i].Name] = &mcs.Items[i]
		}
	}
	if change.apply == nil {
		plan.Operation = "delete"
		if replaced[change.deleted] == nil {
			return plan, fmt.Errorf("MachineConfig %s not found", change.deleted)
		}
	}
	var pools mcfgv1.MachineConfigPoolList
	if err := c.List(ctx, &pools); err != nil {
		return plan, fmt.Errorf("listing MachineConfigPools: %v", err)
	}
	if onlyPool != "" && !slices.ContainsFunc(pools.Items, func(p mcfgv1.MachineConfigPool) bool { return p.Name == onlyPool }) {
		return plan, fmt.Errorf("MachineConfigPool %s not found", onlyPool)
	}
	sort.Slice(pools.Items, func(i, j int) bool { return pools.Items[i].Name < pools.Items[j].Name })
	policies, policyNote, err := livePolicies(ctx, c)
	if err != nil {
		return plan, err
	}
	for i := range pools.Items {
		pool := &pools.Items[i]
		if onlyPool != "" && pool.Name != onlyPool {
			continue
		}
		current, updated, affected, err := poolConfigs(pool, mcs.Items, replaced, change.apply)
		if err != nil {
			return plan, err
		}
		if !affected {
			continue
		}
		pp, err := planPool(ctx, c, pool, current, updated, policies)
		if err != nil {
			return plan, err
		}
		if policyNote != "" {
			pp.Notes = append(pp.Notes, policyNote)
		}
		plan.Pools = append(plan.Pools, pp)
	}
	if len(plan.Pools) == 0 {
		named := change.apply
		if named == nil {
			named = []*mcfgv1.MachineConfig{replaced[change.deleted]}
		}
		var labelled []string
		for _, mc := range named {
			labelled = append(labelled, fmt.Sprintf("%s (labels %s)", mc.Name, labelList(mc.Labels)))
		}
		plan.Message = fmt.Sprintf("No MachineConfigPool selects MachineConfig %s: nothing changes", strings.Join(labelled, ", "))
		if onlyPool != "" {
			plan.Message = fmt.Sprintf("MachineConfigPool %s does not select MachineConfig %s: nothing changes there", onlyPool, strings.Join(labelled, ", "))
		}
	}
	return plan, nil
}

// poolConfigs returns the MachineConfigs pool renders now and after the change (replaced holds
// the cluster's version of each MachineConfig the change names, nil when it has none; apply the
// new versions); affected is false when the pool selects none of them, as they are or would be.
func poolConfigs(pool *mcfgv1.MachineConfigPool, all []mcfgv1.MachineConfig, replaced map[string]*mcfgv1.MachineConfig, apply []*mcfgv1.MachineConfig) (current, updated []*mcfgv1.MachineConfig, affected bool, err error) {
	for i := range all {
		ok, err := render.Selects(pool, &all[i])
		if err != nil {
			return nil, nil, false, err
		}
		if !ok {
			continue
		}
		current = append(current, &all[i])
		if _, named := replaced[all[i].Name]; named {
			affected = true
		} else {
			updated = append(updated, &all[i])
		}
	}
	for _, mc := range apply {
		ok, err := render.Selects(pool, mc)
		if err != nil {
			return nil, nil, false, err
		}
		if ok {
			updated = append(updated, mc)
			affected = true
		}
	}
	return current, updated, affected, nil
}

// planPool decides the change from the pool's current rendered config to the render of updated.
func planPool(ctx context.Context, c client.Reader, pool *mcfgv1.MachineConfigPool, current, updated []*mcfgv1.MachineConfig, policies refresh.Policies) (PoolPlan, error) {
	pp := PoolPlan{Pool: pool.Name, RenderedConfig: pool.Status.Configuration.Name, Paused: pool.Spec.Paused, MachineCount: pool.Status.MachineCount}
	maxUnavailable := intstrutil.FromInt32(1)
	if pool.Spec.MaxUnavailable != nil {
		maxUnavailable = *pool.Spec.MaxUnavailable
	}
	n, err := intstrutil.GetScaledValueFromIntOrPercent(&maxUnavailable, int(pool.Status.MachineCount), false)
	if err != nil {
		return pp, fmt.Errorf("MachineConfigPool %s spec.maxUnavailable: %v", pool.Name, err)
	}
	pp.MaxUnavailable = max(n, 1) // as the MCO's node controller: at least one at a time
	if pp.RenderedConfig == "" {
		return pp, fmt.Errorf("MachineConfigPool %s has no rendered config yet (status.configuration.name)", pool.Name)
	}
	var rendered mcfgv1.MachineConfig
	if err := c.Get(ctx, client.ObjectKey{Name: pp.RenderedConfig}, &rendered); err != nil {
		return pp, fmt.Errorf("MachineConfigPool %s: reading its rendered config: %v", pool.Name, err)
	}
	old, err := parseRendered(&rendered)
	if err != nil {
		return pp, err
	}
	base, baseNote := baseOSImage(ctx, c, &rendered)
	if baseNote != "" {
		pp.Notes = append(pp.Notes, baseNote)
	}
	if len(updated) == 0 {
		return pp, fmt.Errorf("MachineConfigPool %s would render no MachineConfigs at all: the MCO refuses that", pool.Name)
	}
	next, err := renderConfig(updated, base)
	if err != nil {
		return pp, fmt.Errorf("MachineConfigPool %s: %v", pool.Name, err)
	}
	changes, err := refresh.Diff(old, next)
	if err != nil {
		return pp, fmt.Errorf("MachineConfigPool %s: %v", pool.Name, err)
	}
	pp.Result = refresh.Decide(changes, policies)
	if note := pendingNote(old, current, base, pp.RenderedConfig); note != "" {
		pp.Notes = append(pp.Notes, note)
	}
	if pool.Spec.Paused {
		pp.Notes = append(pp.Notes, "The pool is paused: its nodes keep their config until it is unpaused")
	}
	return pp, nil
}

// pendingNote says when the pool's MachineConfigs as they are already render differently from its
// current rendered config (a change not rolled out yet): the plan then includes that change too.
func pendingNote(old refresh.Config, current []*mcfgv1.MachineConfig, base, renderedName string) string {
	now, err := renderConfig(current, base)
	if err != nil {
		return ""
	}
	changes, err := refresh.Diff(old, now)
	if err != nil || len(changes) == 0 {
		return ""
	}
	names := make([]string, len(changes))
	for i, ch := range changes {
		names[i] = string(ch.Kind) + " " + ch.Name
	}
	return fmt.Sprintf("The pool's MachineConfigs already differ from %s before this change (%s): the plan includes that", renderedName, strings.Join(names, "; "))
}

// parseRendered reads a stored rendered config.
func parseRendered(mc *mcfgv1.MachineConfig) (refresh.Config, error) {
	cfg, err := refresh.FromMachineConfig(mc)
	if err != nil {
		return refresh.Config{}, fmt.Errorf("rendered config %s: %v", mc.Name, err)
	}
	return cfg, nil
}

// renderConfig renders configs as the MCO would and reads the result.
func renderConfig(configs []*mcfgv1.MachineConfig, base string) (refresh.Config, error) {
	rendered, err := render.Render(configs, base)
	if err != nil {
		return refresh.Config{}, err
	}
	return refresh.FromMachineConfig(rendered)
}

// baseOSImage is the release's OS image that the MachineConfigs may override: the rendered
// config's own, unless a MachineConfig overrode it there; then the ControllerConfig's.
func baseOSImage(ctx context.Context, c client.Reader, rendered *mcfgv1.MachineConfig) (string, string) {
	if rendered.Annotations[render.OSImageOverriddenAnnotation] != "true" {
		return rendered.Spec.OSImageURL, ""
	}
	cc := &unstructured.Unstructured{}
	cc.SetGroupVersionKind(controllerConfig)
	err := c.Get(ctx, client.ObjectKey{Name: "machine-config-controller"}, cc)
	if err == nil {
		if image, _, _ := unstructured.NestedString(cc.Object, "spec", "baseOSContainerImage"); image != "" {
			return image, ""
		}
	}
	return rendered.Spec.OSImageURL, fmt.Sprintf("The release's OS image is unknown (ControllerConfig machine-config-controller: %v): removing the OS image override is not shown", errOr(err, "no spec.baseOSContainerImage"))
}

func errOr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}

// livePolicies are the cluster's node disruption policies: MachineConfiguration/cluster
// status.nodeDisruptionPolicyStatus, which the MCO computes; its spec merged with the defaults
// while the MCO has not written the status yet. The note says when that fallback was taken.
func livePolicies(ctx context.Context, c client.Reader) (refresh.Policies, string, error) {
	var mc operatorv1.MachineConfiguration
	err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, &mc)
	if apierrors.IsNotFound(err) {
		return refresh.DefaultPolicies(), "No MachineConfiguration cluster: the MCO's default policies apply", nil
	}
	if err != nil {
		return refresh.Policies{}, "", fmt.Errorf("reading MachineConfiguration cluster: %v", err)
	}
	status := mc.Status.NodeDisruptionPolicyStatus.ClusterPolicies
	if len(status.Files) > 0 || len(status.Units) > 0 || len(status.SSHKey.Actions) > 0 {
		return status, "", nil
	}
	policies, err := refresh.MergePolicies(mc.Spec.NodeDisruptionPolicy)
	if err != nil {
		return refresh.Policies{}, "", fmt.Errorf("MachineConfiguration cluster spec.nodeDisruptionPolicy: %v", err)
	}
	return policies, "MachineConfiguration cluster has no status.nodeDisruptionPolicyStatus yet: its spec is merged with the defaults", nil
}

func printLivePlan(w io.Writer, p LivePlan, format string) error {
	if format == "json" || format == "yaml" {
		return printStructured(w, p, format)
	}
	fmt.Fprintf(w, "MachineConfig %s (%s)\n", p.MachineConfig, p.Operation)
	if p.Message != "" {
		fmt.Fprintln(w, p.Message)
	}
	for _, pp := range p.Pools {
		paused := ""
		if pp.Paused {
			paused = ", paused"
		}
		fmt.Fprintf(w, "\nPool %s: %d machines, %d at a time%s, from %s\n", pp.Pool, pp.MachineCount, pp.MaxUnavailable, paused, pp.RenderedConfig)
		if err := printRefresh(w, pp.Result, "table"); err != nil {
			return err
		}
		for _, n := range pp.Notes {
			fmt.Fprintf(w, "Note: %s\n", n)
		}
	}
	return nil
}

// labelList prints labels as a selector does (a=b,c=d), "none" when there are none.
func labelList(l map[string]string) string {
	if len(l) == 0 {
		return "none"
	}
	return labels.Set(l).String()
}
