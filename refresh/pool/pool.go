// Package pool plans a pool's config refresh node by node: which nodes to start, which daemon
// pods to remove, and the ConfigRefreshProgressing/Complete/Degraded conditions. It reads the
// machine config daemon's node annotations and HyperShift's drain handshake.
package pool

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node annotations of the machine config daemon and HyperShift's drainer.
const (
	CurrentConfigAnnotation        = "machineconfiguration.openshift.io/currentConfig"
	DesiredConfigAnnotation        = "machineconfiguration.openshift.io/desiredConfig"
	StateAnnotation                = "machineconfiguration.openshift.io/state"
	ReasonAnnotation               = "machineconfiguration.openshift.io/reason"
	DesiredDrainAnnotation         = "machineconfiguration.openshift.io/desiredDrain"
	LastAppliedDrainAnnotation     = "machineconfiguration.openshift.io/lastAppliedDrain"
	CurrentRefreshConfigAnnotation = "hypershift.openshift.io/currentRefreshConfig"
)

// Daemon states.
const (
	StateDone     = "Done"
	StateWorking  = "Working"
	StateDegraded = "Degraded"
)

// NodePool conditions of the config refresh.
const (
	ConditionProgressing = "ConfigRefreshProgressing"
	ConditionComplete    = "ConfigRefreshComplete"
	ConditionDegraded    = "ConfigRefreshDegraded"
)

// NodeState is what the refresh controller knows about one node.
type NodeState struct {
	Name string
	// RefreshConfig is the refresh the node runs: annotation currentRefreshConfig, or with
	// today's daemon currentConfig (see Delivery).
	RefreshConfig string
	// State and Reason are the daemon's (annotations state and reason).
	State, Reason string
	// DaemonPod is true while a machine-config-daemon pod runs on the node (refresh or upgrade).
	DaemonPod bool
	// Upgrading is true while the daemon has been asked for a config it has not reached
	// (desiredConfig differs from currentConfig): an in-place upgrade, or with today's daemon
	// a refresh in flight.
	Upgrading bool
	// DesiredDrain and LastAppliedDrain are the drain handshake: the daemon asks for a drain or
	// uncordon in desiredDrain and waits, doing nothing, until the drainer copies it to
	// lastAppliedDrain. While they differ the node is busy and its daemon pod must stay.
	DesiredDrain, LastAppliedDrain string
}

// Delivery says how a refresh reaches a node, and so where Plan reads what the node runs.
type Delivery int

const (
	// DeliveryCurrentConfig is today's daemon (machine-config-operator 7ff337a4): it applies
	// when desiredConfig differs from currentConfig and writes currentConfig=<ConfigMap hash>,
	// never currentRefreshConfig. A refresh therefore sets the ConfigMap hash and desiredConfig
	// to RefreshConfigValue(rolloutTarget, payloadHash), which the node reports in currentConfig.
	DeliveryCurrentConfig Delivery = iota
	// DeliveryRefreshAnnotation is a daemon that reports a refresh in currentRefreshConfig
	// (the payload hash) and leaves currentConfig to the rollout target.
	DeliveryRefreshAnnotation
)

// RefreshConfigValue is the refresh target with today's daemon: the rollout target, a dash, the
// payload hash. It never equals a rollout target (8 hex digits), so the in-place upgrader, which
// acts only while its MachineSet target differs from current, upgrades such a node like any
// other, and the drainer, which reads the verb before the first dash of drain-<value>, works.
func RefreshConfigValue(rolloutTarget, payloadHash string) string {
	return rolloutTarget + "-" + payloadHash
}

// Target returns the value PoolState.Target takes for this delivery.
func (d Delivery) Target(rolloutTarget, payloadHash string) string {
	if d == DeliveryRefreshAnnotation {
		return payloadHash
	}
	return RefreshConfigValue(rolloutTarget, payloadHash)
}

// NodeStateFromAnnotations reads a node's refresh state from its annotations.
func NodeStateFromAnnotations(name string, annotations map[string]string, daemonPod bool, d Delivery) NodeState {
	n := NodeState{
		Name: name, State: annotations[StateAnnotation], Reason: annotations[ReasonAnnotation], DaemonPod: daemonPod,
		Upgrading:    annotations[DesiredConfigAnnotation] != "" && annotations[DesiredConfigAnnotation] != annotations[CurrentConfigAnnotation],
		DesiredDrain: annotations[DesiredDrainAnnotation], LastAppliedDrain: annotations[LastAppliedDrainAnnotation],
		RefreshConfig: annotations[CurrentConfigAnnotation],
	}
	if d == DeliveryRefreshAnnotation {
		n.RefreshConfig = annotations[CurrentRefreshConfigAnnotation]
	}
	return n
}

// PoolState is a NodePool's refresh input.
type PoolState struct {
	// Target is the refresh every node should run (Delivery.Target); empty means none is known.
	Target string
	Nodes  []NodeState
	// MaxUnavailable bounds nodes refreshing at once; below 1 means 1.
	MaxUnavailable int
	// ReplaceRollout is true while a Replace rollout runs (MachineDeployment updating, Machines deleting).
	ReplaceRollout bool
	// InPlaceUpgrade is true while the pool's MachineSet says an in-place upgrade runs
	// (hypershift.InPlaceUpgradeInProgress). The upgrader then owns the ConfigMap, the nodes'
	// desiredConfig and the daemon pods, and delivers the full config itself.
	InPlaceUpgrade bool
}

// Progress is what to do next for a pool.
type Progress struct {
	// Refresh are the nodes to start refreshing now, by name.
	Refresh []string
	// RemovePods are the nodes whose refresh is done (target reached, state not Working, drain
	// handshake settled) and whose daemon pod can be deleted, by name.
	RemovePods []string
	Conditions []metav1.Condition
}

// Plan decides the next nodes to refresh, the daemon pods to remove and the pool's conditions.
// Refresh pauses during a Replace rollout and an in-place upgrade (then it removes no pod
// either), never starts where a daemon pod already runs or a drain handshake is open, leaves
// upgrading nodes to the upgrade, and keeps at most MaxUnavailable nodes busy.
func Plan(pool PoolState) Progress {
	nodes := append([]NodeState(nil), pool.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	maxUnavailable := max(pool.MaxUnavailable, 1)

	var done, busy int
	var degraded []NodeState
	var candidates, removable []string
	for _, n := range nodes {
		drainOpen := n.DesiredDrain != n.LastAppliedDrain
		switch {
		case n.State == StateDegraded:
			degraded = append(degraded, n)
			busy++
		case pool.Target != "" && n.RefreshConfig == pool.Target && n.State != StateWorking && !n.Upgrading && !drainOpen:
			done++
			if n.DaemonPod {
				removable = append(removable, n.Name)
			}
		case n.DaemonPod || n.State == StateWorking || n.Upgrading || drainOpen:
			busy++
		default:
			candidates = append(candidates, n.Name)
		}
	}
	var p Progress
	paused := pool.ReplaceRollout || pool.InPlaceUpgrade || pool.Target == ""
	if !paused {
		for _, name := range candidates {
			if busy >= maxUnavailable {
				break
			}
			p.Refresh = append(p.Refresh, name)
			busy++
		}
	}
	if !pool.InPlaceUpgrade {
		p.RemovePods = removable
	}
	total := len(nodes)
	progressing := metav1.Condition{Type: ConditionProgressing, Status: metav1.ConditionFalse, Reason: "AsExpected", Message: fmt.Sprintf("%d/%d nodes refreshed", done, total)}
	complete := metav1.Condition{Type: ConditionComplete, Status: metav1.ConditionFalse, Reason: "Refreshing", Message: fmt.Sprintf("%d/%d nodes refreshed", done, total)}
	switch {
	case pool.Target == "":
		progressing.Reason, progressing.Message = "NoTarget", "No refresh target is known yet"
		complete.Reason, complete.Message = "NoTarget", "No refresh target is known yet"
	case done == total:
		complete.Status, complete.Reason = metav1.ConditionTrue, "AsExpected"
	case pool.InPlaceUpgrade:
		progressing.Reason = "PausedForUpgrade"
		progressing.Message = fmt.Sprintf("Paused while an in-place upgrade runs: %d/%d nodes refreshed", done, total)
	case pool.ReplaceRollout:
		progressing.Reason = "PausedForRollout"
		progressing.Message = fmt.Sprintf("Paused while a Replace rollout runs: %d/%d nodes refreshed", done, total)
	default:
		progressing.Status, progressing.Reason = metav1.ConditionTrue, "Refreshing"
		progressing.Message = fmt.Sprintf("Refreshing %d/%d nodes", total-done, total)
	}
	degradedCond := metav1.Condition{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: "AsExpected", Message: "No node failed to refresh"}
	if len(degraded) > 0 {
		degradedCond.Status, degradedCond.Reason = metav1.ConditionTrue, "RefreshFailed"
		degradedCond.Message = degradedMessage(degraded)
	}
	p.Conditions = []metav1.Condition{progressing, complete, degradedCond}
	return p
}

// A condition message names at most maxNamedNodes failed nodes, each reason cut to
// maxReasonBytes: the API server refuses a status whose message passes 32 KiB, and a pool of
// hundreds of failed nodes must still report.
const (
	maxNamedNodes  = 5
	maxReasonBytes = 256
)

// degradedMessage counts the failed nodes and names the first few, by name, with their reasons.
func degradedMessage(nodes []NodeState) string {
	named := make([]string, 0, maxNamedNodes)
	for _, n := range nodes[:min(len(nodes), maxNamedNodes)] {
		named = append(named, fmt.Sprintf("%s: %s", n.Name, truncate(orUnknown(n.Reason), maxReasonBytes)))
	}
	msg := fmt.Sprintf("%d node(s) failed to refresh: %s", len(nodes), strings.Join(named, "; "))
	if more := len(nodes) - len(named); more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return msg
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}
