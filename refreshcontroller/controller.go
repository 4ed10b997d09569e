package controller

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
)

// Reconciler refreshes the nodes of the NodePools of one hosted control plane namespace.
type Reconciler struct {
	// Management reads NodePools, token Secrets, MachineDeployments and MachineSets of Namespace,
	// and writes NodePool status.
	Management client.Client
	Namespace  string
	// Guest reads and writes the guest cluster's Nodes, upgrade namespaces, ConfigMaps and pods.
	Guest client.Client
	// DaemonImage is the machine-config-daemon image of the pool's release.
	DaemonImage string
	// DaemonTimeout is how long a daemon pod may run without a result before its node is
	// Degraded; DefaultDaemonTimeout when zero.
	DaemonTimeout time.Duration
	// Events records a refresh's end and failures on the NodePool; SetupWithManager sets the
	// management cluster's when nil.
	Events events.EventRecorder
	// ClockSkew is how far this controller's clock may run behind the management API server's,
	// which stamps Machines: a node is adopted as built with the target payload only when its
	// Machine was created more than this after the controller saw the payload in place.
	// DefaultClockSkew when zero.
	ClockSkew time.Duration
}

// DefaultClockSkew allows for clocks kept by NTP; a node created within it of a payload change
// gets a daemon pod, which finds nothing to change if it booted that payload.
const DefaultClockSkew = 10 * time.Second

// DefaultDaemonTimeout bounds a daemon pod's run: a refresh writes a few files and runs a reload,
// so one still going after this is stuck.
const DefaultDaemonTimeout = 15 * time.Minute

// SetupWithManager registers the reconciler with mgr. It watches NodePools, token Secrets,
// MachineDeployments and MachineSets of Namespace through management, and the guest's Nodes and
// daemon pods through guest. Either may be mgr itself: in the HCCO the manager is the guest
// cluster's and the hosted control plane namespace is a cluster added to it (CPCluster).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, management, guest cluster.Cluster) error {
	if r.Events == nil {
		r.Events = management.GetEventRecorder(FieldManager)
	}
	toPool := func(namespace, name string) []reconcile.Request {
		if name == "" || namespace != r.Namespace {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: name}}}
	}
	// The pool's MachineDeployment and MachineSet are named after it, as HyperShift names them.
	byName := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o *unstructured.Unstructured) []reconcile.Request {
		return toPool(o.GetNamespace(), o.GetName())
	})
	return ctrl.NewControllerManagedBy(mgr).Named("configrefresh").
		WatchesRawSource(source.Kind(management.GetCache(), unstructuredOf(NodePoolGVK), byName)).
		WatchesRawSource(source.Kind(management.GetCache(), unstructuredOf(MachineDeploymentGVK), byName)).
		WatchesRawSource(source.Kind(management.GetCache(), unstructuredOf(MachineSetGVK), byName)).
		WatchesRawSource(source.Kind(management.GetCache(), unstructuredOf(MachineGVK), handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, m *unstructured.Unstructured) []reconcile.Request {
			return toPool(m.GetNamespace(), cmp.Or(m.GetLabels()[machineDeploymentNameLabel], m.GetLabels()[machineSetNameLabel]))
		}))).
		WatchesRawSource(source.Kind(management.GetCache(), &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, s *corev1.Secret) []reconcile.Request {
			name, _ := strings.CutPrefix(s.GetName(), "token-")
			if i := strings.LastIndex(name, "-"); i > 0 && name != s.GetName() {
				return toPool(s.Namespace, name[:i])
			}
			return nil
		}))).
		WatchesRawSource(source.Kind(guest.GetCache(), &corev1.Node{}, handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, n *corev1.Node) []reconcile.Request {
			return toPool(r.Namespace, n.Labels[NodePoolLabel])
		}))).
		WatchesRawSource(source.Kind(guest.GetCache(), &corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, p *corev1.Pod) []reconcile.Request {
			name, _ := strings.CutSuffix(p.Namespace, "-upgrade")
			if name == p.Namespace {
				return nil
			}
			return toPool(r.Namespace, name)
		}))).
		Complete(r)
}

func unstructuredOf(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Reconcile runs one step of a NodePool's refresh and always reports its conditions.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &unstructured.Unstructured{}
	np.SetGroupVersionKind(NodePoolGVK)
	if err := r.Management.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	out, stepErr := r.reconcile(ctx, np)
	var statusErr error
	if out.conditions != nil {
		// Report even when a step failed, so the conditions say where the refresh stands.
		statusErr = r.setConditions(ctx, np, out.conditions)
	}
	// Only a conflict and nothing else: a stale read (the daemon or another controller wrote in
	// between), which the next pass reads again; any other error is returned, never hidden.
	conflictOnly := func(err error) bool { return err == nil || apierrors.IsConflict(err) }
	switch err := errors.Join(stepErr, statusErr); {
	case err != nil && conflictOnly(stepErr) && conflictOnly(statusErr):
		log.FromContext(ctx).V(1).Info("Requeuing after a conflict", "error", err.Error())
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	case err != nil:
		return reconcile.Result{}, err
	case out.requeue:
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	case out.conditions == nil:
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: requeueAfter}, nil
}

// outcome is what a pass reports: the conditions to set (nil when nothing is known yet), and
// whether the next pass must read a write this one made.
type outcome struct {
	conditions []metav1.Condition
	requeue    bool
}

func report(p pool.Progress) outcome { return outcome{conditions: p.Conditions} }

// poolPass is what one pass reads of a pool, each phase adding to it.
type poolPass struct {
	name, rollout, payloadHash string
	// target is desiredConfig and the ConfigMap's hash for this payload: rollout-payloadHash.
	target string
	nodes  []corev1.Node
	podOn  map[string]*corev1.Pod
	state  pool.PoolState
	cm     *corev1.ConfigMap // nil when the pool has none
	// machineOf is the pool's Machines by the name of their node; unlinked counts those that
	// name no node yet.
	machineOf map[string]machine
	unlinked  int
}

// reconcile runs the phases of one pass: read the pool; stop while it is paused; read the
// payload of the target; adopt a pool not seen yet; deliver a new payload; move the nodes.
func (r *Reconciler) reconcile(ctx context.Context, np *unstructured.Unstructured) (outcome, error) {
	p, err := r.readPool(ctx, np)
	if err != nil || p == nil {
		return outcome{}, err
	}
	if p.state.InPlaceUpgrade || p.state.ReplaceRollout {
		// The upgrader owns the ConfigMap, desiredConfig and pods, or nodes are being replaced:
		// write nothing, report the pause.
		return report(r.observe(p)), nil
	}
	next, held := r.readPayload(ctx, p)
	if held != nil {
		return *held, nil
	}
	if adopted, out, err := r.adopt(ctx, p, next); adopted || err != nil {
		return out, err
	}
	if out, done, err := r.deliver(ctx, p, next); done || err != nil {
		return out, err
	}
	plan, err := r.advance(ctx, p)
	return report(plan), err
}

// readPool reads the NodePool's targets, its rollout state, nodes, daemon pods and upgrade
// ConfigMap. It returns nil while the NodePool names no target.
func (r *Reconciler) readPool(ctx context.Context, np *unstructured.Unstructured) (*poolPass, error) {
	p := &poolPass{name: np.GetName(), rollout: np.GetAnnotations()[NodePoolCurrentConfigAnnotation],
		payloadHash: np.GetAnnotations()[hypershift.NodePoolTargetRefreshConfigAnnotation]}
	if p.rollout == "" || p.payloadHash == "" {
		return nil, nil
	}
	p.target = pool.RefreshConfigValue(p.rollout, p.payloadHash)
	replaceRollout, inPlaceUpgrade, err := r.rolloutState(ctx, p.name)
	if err != nil {
		return nil, err
	}
	deleting, machines, unlinked, err := r.readMachines(ctx, p.name)
	if err != nil {
		return nil, err
	}
	replaceRollout = replaceRollout || deleting
	p.machineOf, p.unlinked = machines, unlinked
	nodes := &corev1.NodeList{}
	if err := r.Guest.List(ctx, nodes, client.MatchingLabels{NodePoolLabel: p.name}); err != nil {
		return nil, err
	}
	p.nodes = nodes.Items
	ns, cmName := hypershift.UpgradeNames(p.name)
	pods := &corev1.PodList{}
	if err := r.Guest.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	p.podOn = map[string]*corev1.Pod{}
	for i := range pods.Items {
		p.podOn[pods.Items[i].Spec.NodeName] = &pods.Items[i]
	}
	// A node on another rollout target than the NodePool reports (new nodes of a finished Replace
	// rollout, or an in-place upgrade whose MachineSet is done before the NodePool says so): the
	// pool is between rollouts, and adopting now would record a payload those nodes never got.
	// HyperShift writes no currentConfig at first boot (only a daemon does), so a node without one
	// was built with its Machine's rollout target, and with the pool's when no Machine names it.
	for i := range p.nodes {
		c := p.nodes[i].Annotations[pool.CurrentConfigAnnotation]
		if m, ok := p.machineOf[p.nodes[i].Name]; c == "" && ok && m.rollout != "" {
			c = m.rollout
		}
		if c != "" && c != p.rollout && !strings.HasPrefix(c, p.rollout+"-") {
			replaceRollout = true
		}
	}
	p.state = pool.PoolState{Target: p.payloadHash, ReplaceRollout: replaceRollout, InPlaceUpgrade: inPlaceUpgrade,
		MaxUnavailable: maxUnavailable(np, len(p.nodes))}
	cm := &corev1.ConfigMap{}
	switch err := r.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, cm); {
	case err == nil:
		p.cm = cm
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	return p, nil
}

// observe plans the pool as it stands, moving nothing: its conditions, Degraded included.
func (r *Reconciler) observe(p *poolPass) pool.Progress {
	state := p.state
	state.Nodes = nil
	var linking []string
	for i := range p.nodes {
		if p.awaitsMachine(&p.nodes[i]) {
			linking = append(linking, p.nodes[i].Name)
			continue
		}
		state.Nodes = append(state.Nodes, r.nodeState(&p.nodes[i], p.podOn[p.nodes[i].Name], p.rollout, p.target))
	}
	plan := pool.Plan(state)
	if len(linking) > 0 {
		for i := range plan.Conditions {
			if c := &plan.Conditions[i]; c.Type == pool.ConditionComplete {
				c.Status, c.Reason = metav1.ConditionFalse, ReasonNodesJoining
				c.Message += fmt.Sprintf("; waiting for Cluster API to link %s to a Machine", strings.Join(linking[:min(len(linking), 5)], ", "))
			}
		}
	}
	return plan
}

// ReasonNodesJoining (Complete False): a node that joined is left out until Cluster API links
// it to its Machine, whose creation time says which payload it booted (adoptJoined).
const ReasonNodesJoining = "NodesJoining"

// awaitsMachine says whether a node that no daemon has touched and nothing records may still be
// linked to a Machine of the pool: one names no node yet (Cluster API sets nodeRef after the
// node registers). Started now, it would get a daemon pod it may not need.
func (p *poolPass) awaitsMachine(n *corev1.Node) bool {
	_, linked := p.machineOf[n.Name]
	a := n.Annotations
	return p.unlinked > 0 && !linked && a[pool.CurrentConfigAnnotation] == "" && a[pool.CurrentRefreshConfigAnnotation] == "" &&
		a[pool.DesiredConfigAnnotation] == "" && p.podOn[n.Name] == nil
}

// readPayload reads the token Secret's payload of the pool's target. Only a payload the token
// Secret says was generated for the NodePool's payload hash is that hash's: the NodePool
// controller moves the hash before the ignition server writes the payload. Otherwise it returns
// the outcome that says what the pool waits for.
func (r *Reconciler) readPayload(ctx context.Context, p *poolPass) ([]byte, *outcome) {
	token := &corev1.Secret{}
	name := TokenSecretName(p.name, p.rollout)
	if err := r.Management.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, token); err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "Reading the token Secret", "secret", name)
		}
		return nil, &outcome{conditions: heldBack(ReasonWaitingForPayload, fmt.Sprintf("Waiting for token Secret %s: %v", name, err), r.observe(p))}
	}
	if got := string(token.Data[TokenSecretRefreshConfigKey]); got != p.payloadHash {
		msg := fmt.Sprintf("Waiting for token Secret %s to hold the payload of refresh config %s (it holds that of %q)", name, p.payloadHash, got)
		return nil, &outcome{conditions: heldBack(ReasonWaitingForPayload, msg, r.observe(p))}
	}
	next, err := hypershift.DecodePayload(string(token.Data[hypershift.TokenSecretPayloadKey]))
	if err == nil && len(next) == 0 {
		err = errors.New("no payload")
	}
	if err != nil {
		log.FromContext(ctx).Info("Refusing a malformed payload", "secret", name, "reason", err.Error())
		return nil, &outcome{conditions: invalidPayload(fmt.Sprintf("Token Secret %s: %v", name, err), r.observe(p))}
	}
	return next, nil
}

// adopt takes over a pool whose upgrade ConfigMap is missing or of an earlier rollout target. It
// records only what is known to be delivered (see adoption); adopted says the pass ends here.
func (r *Reconciler) adopt(ctx context.Context, p *poolPass, next []byte) (adopted bool, out outcome, err error) {
	if p.cm != nil && strings.HasPrefix(p.cm.Data[hypershift.KeyHash], p.rollout+"-") {
		return false, outcome{}, nil
	}
	a, unknown := adoption(p, next)
	if len(unknown) > 0 {
		msg := fmt.Sprintf("The upgrade ConfigMap is gone and node(s) %s record refresh config(s) whose payload is unknown; a rollout or the ConfigMap restored resolves it",
			strings.Join(unknown[:min(len(unknown), 5)], ", "))
		return true, outcome{conditions: heldBack(ReasonDeliveredPayloadUnknown, msg, r.observe(p))}, nil
	}
	log.FromContext(ctx).Info("Adopting the pool's delivered payload", "nodePool", p.name, "rolloutTarget", p.rollout, "refreshConfig", a.recorded)
	if err := r.writeAdoption(ctx, p, a); err != nil {
		return true, outcome{}, err
	}
	return true, outcome{requeue: true}, nil
}

// deliver writes a new target's payload into the ConfigMap when the daemon can apply it in
// place. done says the pass ends here: the change is not a refresh, or cannot be decided.
func (r *Reconciler) deliver(ctx context.Context, p *poolPass, next []byte) (out outcome, done bool, err error) {
	if p.cm.Data[hypershift.KeyHash] == p.target {
		return outcome{}, false, nil
	}
	current, _, _, err := hypershift.ParseUpgradeConfigMap(p.cm)
	if err != nil {
		return outcome{}, true, err
	}
	verdict, err := decide(p.nodes, current, next)
	if err != nil {
		msg := fmt.Sprintf("Deciding refresh config %s: %v", p.payloadHash, err)
		return outcome{conditions: invalidPayload(msg, r.observe(p))}, true, nil
	}
	if !verdict.Refresh {
		// Left to the next rollout: the NodePool controller sees the reason and stops pinning.
		// Nodes that failed an earlier refresh still count as degraded.
		return report(notARefresh(verdict, r.observe(p))), true, nil
	}
	log.FromContext(ctx).Info("Starting a refresh", "nodePool", p.name, "target", p.target, "reason", verdict.Reason)
	if _, err := hypershift.SetUpgradeConfigMapData(p.cm, next, p.target, hypershift.NoRebootPathsFromPolicies(restartPolicies())); err != nil {
		return outcome{}, true, err
	}
	markPayloadInPlace(p.cm, time.Now())
	return outcome{}, false, r.Guest.Update(ctx, p.cm, client.FieldOwner(FieldManager))
}

// advance moves each node one step towards the target: it settles what an earlier target left
// (see supersede), records finished nodes, removes finished pods and starts nodes within
// maxUnavailable.
func (r *Reconciler) advance(ctx context.Context, p *poolPass) (pool.Progress, error) {
	if err := r.adoptJoined(ctx, p); err != nil {
		return pool.Progress{}, err
	}
	for i := range p.nodes {
		n := &p.nodes[i]
		if err := r.supersede(ctx, p, n); err != nil {
			return pool.Progress{}, err
		}
		if err := r.finishNode(ctx, n, p.rollout); err != nil {
			return pool.Progress{}, err
		}
	}
	plan := r.observe(p)
	for _, node := range plan.RemovePods {
		if err := client.IgnoreNotFound(r.Guest.Delete(ctx, p.podOn[node])); err != nil {
			return plan, err
		}
	}
	for _, node := range plan.Refresh {
		if err := r.startNode(ctx, p.name, node, p.target); err != nil {
			return plan, err
		}
	}
	return plan, nil
}

// supersede settles a node whose daemon pod ran for another refresh of this rollout than the
// target: a pod that has not acted yet is re-targeted (the daemon reads desiredConfig and applies
// the ConfigMap, which already holds the new payload); a pod that finished short of the target
// (a superseded target, or the ConfigMap of one, since the daemon applies what its mounted copy
// holds and reports that hash) is removed, finishNode records what it applied, and the node is
// started again; a Failed pod of an earlier target is removed to retry with this one.
func (r *Reconciler) supersede(ctx context.Context, p *poolPass, n *corev1.Node) error {
	pod := p.podOn[n.Name]
	desired, current := n.Annotations[pool.DesiredConfigAnnotation], n.Annotations[pool.CurrentConfigAnnotation]
	if pod == nil || !strings.HasPrefix(desired, p.rollout+"-") {
		return nil
	}
	switch phase := pod.Status.Phase; {
	case phase == corev1.PodSucceeded && current != p.target, phase == corev1.PodFailed && desired != p.target:
		if err := client.IgnoreNotFound(r.Guest.Delete(ctx, pod)); err != nil {
			return err
		}
		delete(p.podOn, n.Name)
	case phase != corev1.PodSucceeded && phase != corev1.PodFailed && desired != p.target && current != desired && n.Annotations[pool.StateAnnotation] != pool.StateWorking:
		log.FromContext(ctx).Info("Re-targeting a daemon pod", "node", n.Name, "from", desired, "target", p.target)
		return r.annotate(ctx, n, map[string]string{pool.DesiredConfigAnnotation: p.target})
	}
	return nil
}

// rolloutState reads the pool's MachineDeployment (a Replace rollout: replicas not all updated,
// or a generation its controller has not observed yet, when the counts still show the old
// template) and its MachineSet (an in-place upgrade).
func (r *Reconciler) rolloutState(ctx context.Context, name string) (replace, inPlace bool, err error) {
	md := &unstructured.Unstructured{}
	md.SetGroupVersionKind(MachineDeploymentGVK)
	switch err := r.Management.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, md); {
	case err == nil:
		replicas, _, _ := unstructured.NestedInt64(md.Object, "status", "replicas")
		updated, _, _ := unstructured.NestedInt64(md.Object, "status", "upToDateReplicas")
		observed, _, _ := unstructured.NestedInt64(md.Object, "status", "observedGeneration")
		replace = replicas != updated || observed < md.GetGeneration()
	case !apierrors.IsNotFound(err):
		return false, false, err
	}
	ms := &unstructured.Unstructured{}
	ms.SetGroupVersionKind(MachineSetGVK)
	switch err := r.Management.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, ms); {
	case err == nil:
		inPlace = hypershift.InPlaceUpgradeInProgress(ms.GetAnnotations())
	case !apierrors.IsNotFound(err):
		return false, false, err
	}
	return replace, inPlace, nil
}

// Cluster API's labels naming a Machine's MachineDeployment and MachineSet, and HyperShift's
// prefix of the bootstrap data Secret, user-data-<pool>-<rollout target>.
const (
	machineDeploymentNameLabel = "cluster.x-k8s.io/deployment-name"
	machineSetNameLabel        = "cluster.x-k8s.io/set-name"
	userDataSecretPrefix       = "user-data-"
)

// machine is what the controller reads of a Machine: when it was created, and the rollout
// target its bootstrap data names (HyperShift's user-data-<pool>-<target> Secret).
type machine struct {
	name    string
	created time.Time
	rollout string
}

// readMachines reads the pool's Machines (its MachineDeployment's or MachineSet's, both named
// after the pool): whether one is being deleted (a replacement is under way), and each by the
// name of its node.
func (r *Reconciler) readMachines(ctx context.Context, name string) (deleting bool, byNode map[string]machine, unlinked int, err error) {
	byNode = map[string]machine{}
	for _, label := range []string{machineDeploymentNameLabel, machineSetNameLabel} {
		machines := &unstructured.UnstructuredList{}
		machines.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind("MachineList"))
		if err := r.Management.List(ctx, machines, client.InNamespace(r.Namespace), client.MatchingLabels{label: name}); err != nil {
			return false, nil, 0, err
		}
		for _, m := range machines.Items {
			deleting = deleting || m.GetDeletionTimestamp() != nil
			node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
			if node == "" {
				unlinked++
				continue
			}
			data, _, _ := unstructured.NestedString(m.Object, "spec", "bootstrap", "dataSecretName")
			rollout, _ := strings.CutPrefix(data, userDataSecretPrefix+name+"-")
			if rollout == data {
				rollout = ""
			}
			byNode[node] = machine{name: m.GetName(), created: m.GetCreationTimestamp().Time, rollout: rollout}
		}
	}
	return deleting, byNode, unlinked, nil
}

// maxUnavailable reads the NodePool's inPlace or replace maxUnavailable (a number or a percentage
// of the nodes, rounded down); 1 when unset.
func maxUnavailable(np *unstructured.Unstructured, nodes int) int {
	for _, path := range [][]string{{"spec", "management", "inPlace", "maxUnavailable"}, {"spec", "management", "replace", "rollingUpdate", "maxUnavailable"}} {
		v, found, _ := unstructured.NestedFieldNoCopy(np.Object, path...)
		if !found {
			continue
		}
		var is intstr.IntOrString
		switch v := v.(type) {
		case int64:
			is = intstr.FromInt32(int32(v))
		case string:
			is = intstr.FromString(v)
		default:
			continue
		}
		if n, err := intstr.GetScaledValueFromIntOrPercent(&is, nodes, false); err == nil {
			return max(n, 1)
		}
	}
	return 1
}

// nodeState reads a node as refresh/pool plans it: what it runs is currentRefreshConfig, which
// this controller writes (no daemon does).
func (r *Reconciler) nodeState(n *corev1.Node, pod *corev1.Pod, rollout, target string) pool.NodeState {
	s := pool.NodeStateFromAnnotations(n.Name, n.Annotations, pod != nil, pool.DeliveryRefreshAnnotation)
	desired, current := n.Annotations[pool.DesiredConfigAnnotation], n.Annotations[pool.CurrentConfigAnnotation]
	// A node whose daemon failed on this target stays failed without its pod: the daemon stores
	// the new config before its post-actions, so a second run finds nothing to do and reports
	// Done with a failed reload or restart never run. A new target retries it.
	failedOnTarget := desired == target && s.State == pool.StateDegraded
	if pod == nil && strings.HasPrefix(desired, rollout+"-") && (desired != target || current != desired) && !failedOnTarget {
		// A refresh with no pod to run it: superseded (a failed one, its pod removed), or its pod
		// never created or gone. Not an upgrade: start it again.
		s.State, s.Upgrading = "", false
	}
	if reason := r.podFailure(pod); reason != "" && s.State != pool.StateDegraded {
		s.State, s.Reason = pool.StateDegraded, reason
	}
	// A node that is not Ready is busy: it counts against maxUnavailable and gets no daemon pod,
	// which could not run there. One already on the target is done, not busy.
	if !nodeReady(n) && pod == nil && s.RefreshConfig != strings.TrimPrefix(target, rollout+"-") {
		s.State = pool.StateWorking
	}
	return s
}

// Container waiting reasons after which a daemon pod will not start without help.
var stuckReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true}

// podFailure says why one of this controller's daemon pods will never report: it failed (the
// daemon exited before writing Degraded, or the pod was evicted), cannot start, or ran past
// the deadline. Empty while it may still finish.
func (r *Reconciler) podFailure(pod *corev1.Pod) string {
	if pod == nil || pod.Labels[DaemonPodLabel] != "true" || pod.Status.Phase == corev1.PodSucceeded {
		return ""
	}
	if pod.Status.Phase == corev1.PodFailed {
		why := strings.TrimSpace(pod.Status.Reason + " " + pod.Status.Message)
		for _, c := range pod.Status.ContainerStatuses {
			if t := c.State.Terminated; t != nil {
				why = strings.TrimSpace(fmt.Sprintf("%s exit code %d %s", t.Reason, t.ExitCode, why))
			}
		}
		return "daemon pod failed: " + cmp.Or(why, "no reason given")
	}
	for _, c := range pod.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil && stuckReasons[w.Reason] {
			return fmt.Sprintf("daemon pod cannot start: %s: %s", w.Reason, w.Message)
		}
	}
	timeout := cmp.Or(r.DaemonTimeout, DefaultDaemonTimeout)
	started := pod.CreationTimestamp
	if pod.Status.StartTime != nil {
		started = *pod.Status.StartTime
	}
	if !started.IsZero() && time.Since(started.Time) > timeout {
		return fmt.Sprintf("no result from the daemon pod after %s", timeout)
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// adoptionPlan is what adopting a pool writes: the ConfigMap's payload and hash, and the refresh
// config recorded on the nodes built with the rollout target.
type adoptionPlan struct {
	payload  []byte
	recorded string
	nodes    []*corev1.Node
}

// adoption decides what a pool without a ConfigMap of its rollout target runs. Nodes built with
// the rollout target (currentConfig that target, or none: HyperShift writes none at first boot)
// run the token Secret's payload: before this controller, every payload change rolled the pool,
// so they were built from it. After an in-place upgrade, the upgrader's
// ConfigMap (hash = the rollout target exactly) is what they run, which the token Secret's
// payload may have passed since (a refresh deferred during the upgrade). A node that already
// records another refresh config was refreshed by this controller to a payload no longer at
// hand (a lost ConfigMap): unknown lists them, and nothing is adopted.
func adoption(p *poolPass, next []byte) (a adoptionPlan, unknown []string) {
	a.payload, a.recorded = next, p.payloadHash
	if p.cm != nil && p.cm.Data[hypershift.KeyHash] == p.rollout {
		if upgraded, _, _, err := hypershift.ParseUpgradeConfigMap(p.cm); err == nil && len(upgraded) > 0 && !bytes.Equal(upgraded, next) {
			a.payload, a.recorded = upgraded, UpgradedRefreshConfig
		}
	}
	for i := range p.nodes {
		n := &p.nodes[i]
		record := n.Annotations[pool.CurrentRefreshConfigAnnotation]
		switch {
		case p.cm == nil && record != "" && record != a.recorded:
			unknown = append(unknown, n.Name)
		case (n.Annotations[pool.CurrentConfigAnnotation] == p.rollout || n.Annotations[pool.CurrentConfigAnnotation] == "") && record != a.recorded:
			a.nodes = append(a.nodes, n)
		}
	}
	return a, unknown
}

// writeAdoption writes the upgrade namespace and ConfigMap with the adopted payload and records it
// on the nodes.
func (r *Reconciler) writeAdoption(ctx context.Context, p *poolPass, a adoptionPlan) error {
	if err := r.Guest.Create(ctx, hypershift.UpgradeNamespace(p.name), client.FieldOwner(FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	hash := pool.RefreshConfigValue(p.rollout, a.recorded)
	paths := hypershift.NoRebootPathsFromPolicies(restartPolicies())
	cm := p.cm
	if cm == nil {
		var err error
		if cm, err = hypershift.BuildUpgradeConfigMap(p.name, a.payload, hash, paths); err != nil {
			return err
		}
	} else if _, err := hypershift.SetUpgradeConfigMapData(cm, a.payload, hash, paths); err != nil {
		return err
	}
	if a.recorded == p.payloadHash {
		// The token Secret's payload, as this pass read it.
		markPayloadInPlace(cm, time.Now())
	} else {
		delete(cm.Annotations, PayloadInPlaceAnnotation)
	}
	var err error
	if p.cm == nil {
		err = r.Guest.Create(ctx, cm, client.FieldOwner(FieldManager))
	} else {
		err = r.Guest.Update(ctx, cm, client.FieldOwner(FieldManager))
	}
	if err != nil {
		return err
	}
	for _, n := range a.nodes {
		if err := r.annotate(ctx, n, map[string]string{pool.CurrentRefreshConfigAnnotation: a.recorded}); err != nil {
			return err
		}
	}
	return nil
}

// finishNode records a node whose daemon reached a refresh of this rollout target (the target,
// or one it superseded): currentRefreshConfig is that refresh's payload hash, as the daemon
// reports the hash of the ConfigMap it applied. The daemon's uncordon request is acknowledged,
// since a refresh never cordons.
func (r *Reconciler) finishNode(ctx context.Context, n *corev1.Node, rollout string) error {
	a := n.Annotations
	current := a[pool.CurrentConfigAnnotation]
	payloadHash, ok := strings.CutPrefix(current, rollout+"-")
	if !ok || a[pool.StateAnnotation] != pool.StateDone {
		return nil
	}
	want := map[string]string{}
	if d := a[pool.DesiredDrainAnnotation]; d == "uncordon-"+current && a[pool.LastAppliedDrainAnnotation] != d {
		want[pool.LastAppliedDrainAnnotation] = d
	}
	if a[pool.CurrentRefreshConfigAnnotation] != payloadHash {
		want[pool.CurrentRefreshConfigAnnotation] = payloadHash
	}
	if len(want) == 0 {
		return nil
	}
	return r.annotate(ctx, n, want)
}

// startNode asks the daemon for the refresh target and runs its pod on the node.
func (r *Reconciler) startNode(ctx context.Context, poolName, node, target string) error {
	n := &corev1.Node{}
	if err := r.Guest.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return err
	}
	if err := r.annotate(ctx, n, map[string]string{pool.DesiredConfigAnnotation: target}); err != nil {
		return err
	}
	log.FromContext(ctx).Info("Starting a daemon pod", "node", node, "target", target)
	return client.IgnoreAlreadyExists(r.Guest.Create(ctx, DaemonPod(poolName, node, r.DaemonImage), client.FieldOwner(FieldManager)))
}

// annotate merge-patches annotations on a node, with its resourceVersion so a stale read fails.
func (r *Reconciler) annotate(ctx context.Context, n *corev1.Node, annotations map[string]string) error {
	base := n.DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		n.Annotations[k] = v
	}
	return r.Guest.Patch(ctx, n, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager))
}

// requeueAfter bounds how long a pool waits when no watch fires (a daemon pod that never ends).
const requeueAfter = 30 * time.Second
