// Package daemonsim is a stand-in for the machine-config-daemon in HyperShift mode (the MCO at
// 7ff337a4, syncNodeHypershift), for tests and trials without nodes: for each daemon pod it acts
// as the daemon on the pod's node would. It acts only when desiredConfig differs from
// currentConfig and the drain handshake is settled; reads the mounted ConfigMap's config and hash
// (and, as the daemon, ignores no-reboot-paths); decides from its current config with rules of
// its own (rules.go), sharing no code with refresh/ so that a mistake there shows; writes the
// files under a root of its own, then stores the new config as current, then runs the service
// actions its table names (a failed one leaves the node Degraded, SetPostActionFail); writes
// state, reason, currentConfig and desiredDrain; and reboots (counted) or fails where the daemon
// would. It then ends the pod as the kubelet would: Failed when the daemon exits on an error.
package daemonsim

import (
	"context"
	"encoding/json"
	"fmt"
	"k8s.io/client-go/util/retry"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"github.com/vincent-petithory/dataurl"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// CurrentConfigFile is where the daemon keeps the config a node runs, below the node's root.
const CurrentConfigFile = "etc/mcd-currentconfig.json"

// The node annotations the daemon reads and writes, spelled as the daemon spells them: the
// stand-in imports neither the controller nor refresh/.
const (
	currentConfigAnnotation    = "machineconfiguration.openshift.io/currentConfig"
	desiredConfigAnnotation    = "machineconfiguration.openshift.io/desiredConfig"
	stateAnnotation            = "machineconfiguration.openshift.io/state"
	reasonAnnotation           = "machineconfiguration.openshift.io/reason"
	desiredDrainAnnotation     = "machineconfiguration.openshift.io/desiredDrain"
	lastAppliedDrainAnnotation = "machineconfiguration.openshift.io/lastAppliedDrain"
	stateDone                  = "Done"
	stateDegraded              = "Degraded"
	// capabilitiesAnnotation is where a daemon says what it can do beyond today's HyperShift
	// mode (the refresh controller's DaemonCapabilitiesAnnotation).
	capabilitiesAnnotation = "hypershift.openshift.io/daemonCapabilities"
)

// canRestart says whether node's daemon runs Restart actions: it says so on its node.
func (d *Daemon) canRestart(node *corev1.Node) bool {
	for c := range strings.SplitSeq(node.Annotations[capabilitiesAnnotation], ",") {
		if strings.TrimSpace(c) == "Restart" {
			return true
		}
	}
	return false
}

// waitFor is how soon the daemon looks again while its ConfigMap lags.
const waitFor = 100 * time.Millisecond

// Daemon plays the daemon of every node of a guest cluster.
type Daemon struct {
	Client client.Client
	// Root holds one folder per node, each the node's /.
	Root string

	mu sync.Mutex
	// fail makes the daemon on these nodes fail, with the given reason (SetFail).
	fail map[string]string
	// held nodes keep their daemon pods Pending, as a kubelet slow to start them does (Hold).
	held map[string]bool
	// postFail makes a service action on these nodes fail after the files are written
	// (SetPostActionFail).
	postFail map[string]string
	reboots  map[string]int
	drains   map[string]int
	verdicts map[string][]string
	actions  map[string][]string
}

// SetupWithManager runs the daemon for the pods of mgr's cluster.
func (d *Daemon) SetupWithManager(mgr ctrl.Manager) error { return d.SetupWithCluster(mgr, mgr) }

// SetupWithCluster runs the daemon, in mgr, for the pods of guest (another cluster than mgr's).
func (d *Daemon) SetupWithCluster(mgr ctrl.Manager, guest cluster.Cluster) error {
	// A daemon watches its Node too, as the MCD's node informer does: a desiredConfig moved to
	// another target, or its drain acknowledged, sets a running daemon going without any change
	// to its pod.
	podsOnNode := func(ctx context.Context, n *corev1.Node) []reconcile.Request {
		pods := &corev1.PodList{}
		if err := guest.GetCache().List(ctx, pods); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName == n.Name {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
			}
		}
		return reqs
	}
	return ctrl.NewControllerManagedBy(mgr).Named("daemonsim").
		WatchesRawSource(source.Kind(guest.GetCache(), &corev1.Pod{}, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{})).
		WatchesRawSource(source.Kind(guest.GetCache(), &corev1.Node{}, handler.TypedEnqueueRequestsFromMapFunc(podsOnNode))).
		Complete(d)
}

// Seed writes the config a node was built with, as the first boot does.
func (d *Daemon) Seed(node string, payload []byte) error {
	p := filepath.Join(d.Root, node, CurrentConfigFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, payload, 0o600)
}

// SetFail makes the daemon on node fail with reason from its next run; an empty reason heals it.
func (d *Daemon) SetFail(node, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail == nil {
		d.fail = map[string]string{}
	}
	if reason == "" {
		delete(d.fail, node)
		return
	}
	d.fail[node] = reason
}

// SetPostActionFail makes the first service action (a reload or restart) the daemon on node runs
// after writing its files fail with reason, from its next run; an empty reason heals it.
func (d *Daemon) SetPostActionFail(node, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.postFail == nil {
		d.postFail = map[string]string{}
	}
	if reason == "" {
		delete(d.postFail, node)
		return
	}
	d.postFail[node] = reason
}

// Hold keeps the daemon of node from acting while on is true: its pods stay Pending, or Running
// without a result, as a slow kubelet, image pull or a stuck daemon does; releasing it lets them run.
func (d *Daemon) Hold(node string, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held == nil {
		d.held = map[string]bool{}
	}
	d.held[node] = on
}

func (d *Daemon) isHeld(node string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held[node]
}

func (d *Daemon) failure(node string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	reason, ok := d.fail[node]
	return reason, ok
}

// Reboots and Drains count what the daemon did on a node; Verdicts lists its decisions' reasons.
func (d *Daemon) Reboots(node string) int { d.mu.Lock(); defer d.mu.Unlock(); return d.reboots[node] }
func (d *Daemon) Drains(node string) int  { d.mu.Lock(); defer d.mu.Unlock(); return d.drains[node] }
func (d *Daemon) Verdicts(node string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.verdicts[node]...)
}

// Actions lists the service actions the daemon ran on a node, a failed one included.
func (d *Daemon) Actions(node string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.actions[node]...)
}

func (d *Daemon) record(m *map[string]int, node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[node]++
}

// Reconcile runs the daemon of one pod's node once: a pending pod is first set running.
func (d *Daemon) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := d.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Spec.NodeName == "" {
		return reconcile.Result{}, nil
	}
	if pod.DeletionTimestamp != nil {
		// The kubelet stops a running pod that is deleted and confirms it; with no kubelet the
		// API server would keep it terminating for good.
		return reconcile.Result{}, client.IgnoreNotFound(d.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	}
	if d.isHeld(pod.Spec.NodeName) {
		// Released by Hold: the pod is read again then.
		return reconcile.Result{RequeueAfter: waitFor}, nil
	}
	if pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending {
		// The kubelet starts the container; the status update brings the pod back here.
		pod.Status.Phase = corev1.PodRunning
		return reconcile.Result{}, d.Client.Status().Update(ctx, pod)
	}
	node := &corev1.Node{}
	if err := d.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		return reconcile.Result{}, err
	}
	a := node.Annotations
	desired := a[desiredConfigAnnotation]
	if desired == "" || desired == a[currentConfigAnnotation] || a[desiredDrainAnnotation] != a[lastAppliedDrainAnnotation] {
		return reconcile.Result{}, nil
	}
	cm := &corev1.ConfigMap{}
	cmName := pod.Namespace // the upgrade namespace and ConfigMap share the name
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: cmName}, cm); err != nil {
		return reconcile.Result{}, err
	}
	// Today's daemon reads config and hash only; no-reboot-paths is not its input.
	hash := cm.Data["hash"]
	next, err := decode(cm.Data["config"])
	if err != nil {
		return reconcile.Result{}, d.finish(ctx, pod, node, map[string]string{stateAnnotation: stateDegraded, reasonAnnotation: err.Error()}, corev1.PodFailed)
	}
	// As syncNodeHypershift: the daemon never compares the ConfigMap's hash with desiredConfig; it
	// applies what the ConfigMap holds and reports that hash, whatever it was asked for.
	if reason, ok := d.failure(node.Name); ok {
		return reconcile.Result{}, d.finish(ctx, pod, node, map[string]string{stateAnnotation: stateDegraded, reasonAnnotation: reason}, corev1.PodFailed)
	}
	current, err := os.ReadFile(filepath.Join(d.Root, node.Name, CurrentConfigFile))
	if err != nil {
		return reconcile.Result{}, d.finish(ctx, pod, node, map[string]string{stateAnnotation: stateDegraded, reasonAnnotation: "reading the current config: " + err.Error()}, corev1.PodFailed)
	}
	v, err := decide(current, next, d.canRestart(node))
	if err != nil {
		return reconcile.Result{}, d.finish(ctx, pod, node, map[string]string{stateAnnotation: stateDegraded, reasonAnnotation: err.Error()}, corev1.PodFailed)
	}
	d.mu.Lock()
	if d.verdicts == nil {
		d.verdicts = map[string][]string{}
	}
	d.verdicts[node.Name] = append(d.verdicts[node.Name], v.outcome)
	d.mu.Unlock()
	return reconcile.Result{}, d.apply(ctx, pod, node, next, hash, v)
}

// apply carries out a verdict on the node: files first, then the config stored as current, then
// the service actions, in that order as the daemon does, so a failed action leaves the new
// files and stored config behind a Degraded node.
func (d *Daemon) apply(ctx context.Context, pod *corev1.Pod, node *corev1.Node, next []byte, hash string, v verdict) error {
	degraded := func(reason string) error {
		// The daemon in HyperShift mode writes Degraded and exits: the pod fails.
		return d.finish(ctx, pod, node, map[string]string{stateAnnotation: stateDegraded, reasonAnnotation: reason}, corev1.PodFailed)
	}
	switch v.outcome {
	case Rejected:
		return degraded("cannot apply: " + v.why)
	case NeedsDrain:
		d.record(&d.drains, node.Name)
	case NeedsReboot:
		d.record(&d.reboots, node.Name)
	}
	if err := writeFiles(filepath.Join(d.Root, node.Name), next); err != nil {
		return degraded(err.Error())
	}
	if err := d.Seed(node.Name, next); err != nil {
		return err
	}
	if v.outcome == Refreshable {
		if reason := d.runActions(node.Name, v.actions); reason != "" {
			return degraded(reason)
		}
	}
	return d.finish(ctx, pod, node, map[string]string{
		stateAnnotation: stateDone, reasonAnnotation: "", currentConfigAnnotation: hash,
		desiredDrainAnnotation: "uncordon-" + hash,
	}, corev1.PodSucceeded)
}

// runActions runs the service actions in order and says why one failed (SetPostActionFail).
func (d *Daemon) runActions(node string, actions []string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.actions == nil {
		d.actions = map[string][]string{}
	}
	for _, a := range actions {
		d.actions[node] = append(d.actions[node], a)
		if reason, ok := d.postFail[node]; ok {
			return fmt.Sprintf("post-config action %q failed after the files were written: %s", a, reason)
		}
	}
	return ""
}

// finish writes the node's annotations, then ends the pod with phase. Each write is retried on
// a conflict, on the object read afresh, as the MCO's node writer retries: a run is never
// repeated for a write that lost a race, since a repeated run finds nothing left to do and
// would report Done for a failed action.
func (d *Daemon) finish(ctx context.Context, pod *corev1.Pod, node *corev1.Node, annotations map[string]string, phase corev1.PodPhase) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := d.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		base := node.DeepCopy()
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		for k, v := range annotations {
			node.Annotations[k] = v
		}
		return d.Client.Patch(ctx, node, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := d.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		pod.Status.Phase = phase
		return d.Client.Status().Update(ctx, pod)
	})
}

// writeFiles writes the served MachineConfig's files below root, as the daemon writes them.
func writeFiles(root string, payload []byte) error {
	var served ign.Config
	if err := json.Unmarshal(payload, &served); err != nil {
		return err
	}
	for _, f := range served.Storage.Files {
		if f.Path != "/etc/mcs-machine-config-content.json" || f.Contents.Source == nil {
			continue
		}
		du, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			return err
		}
		var mc mcfgv1.MachineConfig
		if err := json.Unmarshal(du.Data, &mc); err != nil {
			return err
		}
		var ic ign.Config
		if err := json.Unmarshal(mc.Spec.Config.Raw, &ic); err != nil {
			return err
		}
		for _, file := range ic.Storage.Files {
			if file.Contents.Source == nil {
				continue
			}
			data, err := dataurl.DecodeString(*file.Contents.Source)
			if err != nil {
				return fmt.Errorf("file %s: %v", file.Path, err)
			}
			p := filepath.Join(root, filepath.Clean(file.Path))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, data.Data, 0o600); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("no served MachineConfig in the payload")
}
