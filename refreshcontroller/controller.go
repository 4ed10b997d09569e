package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootimage-operator/bootimage-operator/refresh"
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
}

// SetupWithManager registers the reconciler with mgr. It watches NodePools, token Secrets,
// MachineDeployments and MachineSets of Namespace through management, and the guest's Nodes and
// daemon pods through guest. Either may be mgr itself: in the HCCO the manager is the guest
// cluster's and the hosted control plane namespace is a cluster added to it (CPCluster).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, management, guest cluster.Cluster) error {
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
	progress, stepErr := r.reconcile(ctx, np)
	if errors.Is(stepErr, errRequeue) {
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	}
	if progress.Conditions == nil {
		return reconcile.Result{}, stepErr
	}
	// Report even when a step failed, so the conditions say where the refresh stands.
	statusErr := r.setConditions(ctx, np, progress.Conditions)
	return reconcile.Result{RequeueAfter: requeueAfter}, errors.Join(stepErr, statusErr)
}

// reconcile runs one step and returns its plan, whose conditions are nil when nothing is known yet.
func (r *Reconciler) reconcile(ctx context.Context, np *unstructured.Unstructured) (pool.Progress, error) {
	logger := log.FromContext(ctx)
	name := np.GetName()
	rollout := np.GetAnnotations()[NodePoolCurrentConfigAnnotation]
	payloadHash := np.GetAnnotations()[hypershift.NodePoolTargetRefreshConfigAnnotation]
	if rollout == "" || payloadHash == "" {
		return pool.Progress{}, nil
	}
	token := &corev1.Secret{}
	if err := r.Management.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: TokenSecretName(name, rollout)}, token); err != nil {
		return pool.Progress{}, fmt.Errorf("reading the token Secret: %w", err)
	}
	next, err := hypershift.DecodePayload(string(token.Data[hypershift.TokenSecretPayloadKey]))
	if err != nil || len(next) == 0 {
		return pool.Progress{}, fmt.Errorf("token Secret %s has no payload: %v", token.Name, err)
	}
	replaceRollout, inPlaceUpgrade, err := r.rolloutState(ctx, name)
	if err != nil {
		return pool.Progress{}, err
	}

	nodes := &corev1.NodeList{}
	if err := r.Guest.List(ctx, nodes, client.MatchingLabels{NodePoolLabel: name}); err != nil {
		return pool.Progress{}, err
	}
	ns, cmName := hypershift.UpgradeNames(name)
	pods := &corev1.PodList{}
	if err := r.Guest.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return pool.Progress{}, err
	}
	podOn := map[string]*corev1.Pod{}
	for i := range pods.Items {
		podOn[pods.Items[i].Spec.NodeName] = &pods.Items[i]
	}
	target := pool.RefreshConfigValue(rollout, payloadHash)

	// A node on another rollout target than the NodePool reports (new nodes of a finished Replace
	// rollout, or an in-place upgrade whose MachineSet is done before the NodePool says so): the
	// pool is between rollouts, and adopting now would record a payload those nodes never got.
	for i := range nodes.Items {
		if c := nodes.Items[i].Annotations[pool.CurrentConfigAnnotation]; c != rollout && !strings.HasPrefix(c, rollout+"-") {
			replaceRollout = true
		}
	}
	state := pool.PoolState{Target: payloadHash, ReplaceRollout: replaceRollout, InPlaceUpgrade: inPlaceUpgrade,
		MaxUnavailable: maxUnavailable(np, len(nodes.Items))}
	if inPlaceUpgrade || replaceRollout {
		// The upgrader owns the ConfigMap, desiredConfig and pods, or nodes are being replaced:
		// write nothing, report the pause.
		for i := range nodes.Items {
			state.Nodes = append(state.Nodes, nodeState(&nodes.Items[i], podOn, rollout, target))
		}
		return pool.Plan(state), nil
	}

	cm := &corev1.ConfigMap{}
	err = r.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, cm)
	if apierrors.IsNotFound(err) || err == nil && !strings.HasPrefix(cm.Data[hypershift.KeyHash], rollout+"-") {
		// Adoption, or a rollout finished: the nodes built with this rollout target run the token
		// Secret's payload, so it is the delivered one; nothing moves.
		delivered, recorded := next, payloadHash
		if err == nil && cm.Data[hypershift.KeyHash] == rollout {
			// The in-place upgrader wrote this hash: the nodes run its config, which the token
			// Secret's payload may have passed since (a refresh deferred during the upgrade).
			if upgraded, _, _, perr := hypershift.ParseUpgradeConfigMap(cm); perr == nil && len(upgraded) > 0 && !bytes.Equal(upgraded, next) {
				delivered, recorded = upgraded, UpgradedRefreshConfig
			}
		}
		logger.Info("Adopting the pool's delivered payload", "nodePool", name, "rolloutTarget", rollout, "refreshConfig", recorded)
		if err := r.adopt(ctx, name, delivered, pool.RefreshConfigValue(rollout, recorded), rollout, nodes.Items, recorded); err != nil {
			return pool.Progress{}, err
		}
		return pool.Progress{}, errRequeue
	} else if err != nil {
		return pool.Progress{}, err
	}
	if cm.Data[hypershift.KeyHash] != target {
		current, _, _, err := hypershift.ParseUpgradeConfigMap(cm)
		if err != nil {
			return pool.Progress{}, err
		}
		verdict, err := hypershift.DecideRefresh(current, next)
		if err != nil {
			return pool.Progress{}, err
		}
		if !verdict.Refresh {
			// Left to the next rollout: the NodePool controller sees the reason and stops pinning.
			// Nodes that failed an earlier refresh still count as degraded.
			for i := range nodes.Items {
				state.Nodes = append(state.Nodes, nodeState(&nodes.Items[i], podOn, rollout, target))
			}
			return notARefresh(verdict, pool.Plan(state)), nil
		}
		logger.Info("Delivering a refresh", "nodePool", name, "target", target, "reason", verdict.Reason)
		if _, err := hypershift.SetUpgradeConfigMapData(cm, next, target, hypershift.NoRebootPathsFromPolicies(refresh.DefaultPolicies())); err != nil {
			return pool.Progress{}, err
		}
		if err := r.Guest.Update(ctx, cm, client.FieldOwner(FieldManager)); err != nil {
			return pool.Progress{}, err
		}
	}

	for i := range nodes.Items {
		n := &nodes.Items[i]
		if p := podOn[n.Name]; p != nil && p.Status.Phase == corev1.PodFailed && n.Annotations[pool.DesiredConfigAnnotation] != target {
			// A daemon that failed an earlier target: retry with this one.
			if err := client.IgnoreNotFound(r.Guest.Delete(ctx, p)); err != nil {
				return pool.Progress{}, err
			}
			delete(podOn, n.Name)
		}
		if err := r.finishNode(ctx, n, target, payloadHash); err != nil {
			return pool.Progress{}, err
		}
		state.Nodes = append(state.Nodes, nodeState(n, podOn, rollout, target))
	}
	plan := pool.Plan(state)
	for _, node := range plan.RemovePods {
		if err := client.IgnoreNotFound(r.Guest.Delete(ctx, podOn[node])); err != nil {
			return plan, err
		}
	}
	for _, node := range plan.Refresh {
		if err := r.startNode(ctx, name, node, target); err != nil {
			return plan, err
		}
	}
	return plan, nil
}

// errRequeue asks for another pass after a write the next step reads.
var errRequeue = errors.New("requeue")

// rolloutState reads the pool's MachineDeployment (a Replace rollout: replicas not all updated)
// and MachineSet (an in-place upgrade).
func (r *Reconciler) rolloutState(ctx context.Context, name string) (replace, inPlace bool, err error) {
	md := &unstructured.Unstructured{}
	md.SetGroupVersionKind(MachineDeploymentGVK)
	switch err := r.Management.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, md); {
	case err == nil:
		replicas, _, _ := unstructured.NestedInt64(md.Object, "status", "replicas")
		updated, _, _ := unstructured.NestedInt64(md.Object, "status", "upToDateReplicas")
		replace = replicas != updated
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
// this controller writes (no daemon does). A node that is not Ready is busy: it counts against
// maxUnavailable and gets no daemon pod.
func nodeState(n *corev1.Node, podOn map[string]*corev1.Pod, rollout, target string) pool.NodeState {
	s := pool.NodeStateFromAnnotations(n.Name, n.Annotations, podOn[n.Name] != nil, pool.DeliveryRefreshAnnotation)
	if desired := n.Annotations[pool.DesiredConfigAnnotation]; desired != target && strings.HasPrefix(desired, rollout+"-") && !s.DaemonPod {
		// An earlier refresh this one supersedes (a failed one, its pod removed): not an upgrade.
		s.State, s.Upgrading = "", false
	}
	if !nodeReady(n) && !s.DaemonPod {
		s.State = pool.StateWorking
	}
	return s
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// adopt writes the upgrade namespace and ConfigMap with the served payload and records it as
// what the nodes built with the rollout target run.
func (r *Reconciler) adopt(ctx context.Context, name string, payload []byte, target, rollout string, nodes []corev1.Node, payloadHash string) error {
	ns := hypershift.UpgradeNamespace(name)
	if err := r.Guest.Create(ctx, ns, client.FieldOwner(FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cm, err := hypershift.BuildUpgradeConfigMap(name, payload, target, hypershift.NoRebootPathsFromPolicies(refresh.DefaultPolicies()))
	if err != nil {
		return err
	}
	existing := &corev1.ConfigMap{}
	switch err := r.Guest.Get(ctx, client.ObjectKeyFromObject(cm), existing); {
	case apierrors.IsNotFound(err):
		if err := r.Guest.Create(ctx, cm, client.FieldOwner(FieldManager)); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if _, err := hypershift.SetUpgradeConfigMapData(existing, payload, target, hypershift.NoRebootPathsFromPolicies(refresh.DefaultPolicies())); err != nil {
			return err
		}
		if err := r.Guest.Update(ctx, existing, client.FieldOwner(FieldManager)); err != nil {
			return err
		}
	}
	for i := range nodes {
		n := &nodes[i]
		if n.Annotations[pool.CurrentConfigAnnotation] != rollout {
			continue
		}
		if err := r.annotate(ctx, n, map[string]string{pool.CurrentRefreshConfigAnnotation: payloadHash}); err != nil {
			return err
		}
	}
	return nil
}

// finishNode records a node whose daemon reached the refresh target: currentRefreshConfig is the
// payload hash. The daemon's uncordon request is acknowledged, since a refresh never cordons.
func (r *Reconciler) finishNode(ctx context.Context, n *corev1.Node, target, payloadHash string) error {
	a := n.Annotations
	if a[pool.CurrentConfigAnnotation] != target || a[pool.StateAnnotation] != pool.StateDone {
		return nil
	}
	want := map[string]string{}
	if d := a[pool.DesiredDrainAnnotation]; d == "uncordon-"+target && a[pool.LastAppliedDrainAnnotation] != d {
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
