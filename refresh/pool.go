package refresh

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node annotations of the machine config daemon.
const (
	CurrentConfigAnnotation        = "machineconfiguration.openshift.io/currentConfig"
	DesiredConfigAnnotation        = "machineconfiguration.openshift.io/desiredConfig"
	StateAnnotation                = "machineconfiguration.openshift.io/state"
	ReasonAnnotation               = "machineconfiguration.openshift.io/reason"
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
	// RefreshConfig is the payload hash the node runs (annotation currentRefreshConfig).
	RefreshConfig string
	// State and Reason are the daemon's (annotations state and reason).
	State, Reason string
	// DaemonPod is true while a machine-config-daemon pod runs on the node (refresh or upgrade).
	DaemonPod bool
	// Upgrading is true while an in-place upgrade targets the node.
	Upgrading bool
}

// PoolState is a NodePool's refresh input.
type PoolState struct {
	// Target is the payload hash every node should run.
	Target string
	Nodes  []NodeState
	// MaxUnavailable bounds nodes refreshing at once; below 1 means 1.
	MaxUnavailable int
	// ReplaceRollout is true while a Replace rollout runs (MachineDeployment updating, Machines deleting).
	ReplaceRollout bool
}

// Progress is what to do next for a pool.
type Progress struct {
	// Refresh are the nodes to start refreshing now, by name.
	Refresh    []string
	Conditions []metav1.Condition
}

// Plan decides the next nodes to refresh and the pool's conditions. Refresh pauses during a
// Replace rollout, never starts where a daemon pod already runs, leaves upgrading nodes to the
// upgrade (which delivers the full config), and keeps at most MaxUnavailable nodes busy.
func Plan(pool PoolState) Progress {
	nodes := append([]NodeState(nil), pool.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	maxUnavailable := max(pool.MaxUnavailable, 1)

	var done, busy int
	var degraded []string
	var candidates []string
	for _, n := range nodes {
		switch {
		case n.State == StateDegraded:
			degraded = append(degraded, fmt.Sprintf("%s: %s", n.Name, orUnknown(n.Reason)))
			busy++
		case n.RefreshConfig == pool.Target && n.State != StateWorking && !n.DaemonPod:
			done++
		case n.DaemonPod || n.State == StateWorking || n.Upgrading:
			busy++
		default:
			candidates = append(candidates, n.Name)
		}
	}
	var p Progress
	if !pool.ReplaceRollout {
		for _, name := range candidates {
			if busy >= maxUnavailable {
				break
			}
			p.Refresh = append(p.Refresh, name)
			busy++
		}
	}
	total := len(nodes)
	progressing := metav1.Condition{Type: ConditionProgressing, Status: metav1.ConditionFalse, Reason: "AsExpected", Message: fmt.Sprintf("%d/%d nodes refreshed", done, total)}
	complete := metav1.Condition{Type: ConditionComplete, Status: metav1.ConditionFalse, Reason: "Refreshing", Message: fmt.Sprintf("%d/%d nodes refreshed", done, total)}
	switch {
	case done == total:
		complete.Status, complete.Reason = metav1.ConditionTrue, "AsExpected"
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
		degradedCond.Message = fmt.Sprintf("%d node(s) failed to refresh: %s", len(degraded), strings.Join(degraded, "; "))
	}
	p.Conditions = []metav1.Condition{progressing, complete, degradedCond}
	return p
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}
