// Package hypershift is the refresh module's HyperShift side: whether a served payload change is
// a config refresh (DecideRefresh), HyperShift's config hashes and their split into rollout and
// payload parts (SplitInputs, NextTargets), the upgrade ConfigMap and its no-reboot-paths key,
// and the names of the objects HyperShift's in-place upgrader shares (openshift/hypershift
// 3ee96155, machine-config-operator 7ff337a4).
package hypershift

import (
	"fmt"
	"strings"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// Verdict is what a refresh controller may do with a payload change, without reading actions.
type Verdict struct {
	// Refresh is true when the new payload can be delivered to running nodes with no drain and
	// no reboot: the only change a config refresh may deliver. A drain is not a refresh.
	Refresh bool `json:"refresh"`
	// Reason is one of the Reason constants.
	Reason string `json:"reason"`
	// Message says why, naming the changes that decided it.
	Message string `json:"message"`
	// Result is the whole decision: the actions that follow the write, and every change with
	// its rule.
	Result refresh.Result `json:"result"`
}

// Verdict reasons.
const (
	// ReasonNoChange: the nodes' MachineConfig stays the same; delivering writes nothing.
	ReasonNoChange = "NoChange"
	// ReasonRefreshable: written in place, then the actions run; no drain, no reboot.
	ReasonRefreshable = "Refreshable"
	// ReasonNeedsDrain: written in place only after the node is drained (a registries.conf
	// change that is not safe, or a Drain policy): deliver it with a rollout or an upgrade.
	ReasonNeedsDrain = "NeedsDrain"
	// ReasonNeedsReboot: a change needs a reboot (or new nodes).
	ReasonNeedsReboot = "NeedsReboot"
	// ReasonRejected: a change cannot be applied to a running node at all.
	ReasonRejected = "Rejected"
)

// maxNamed bounds the changes a message names, so it stays short whatever the payload.
const maxNamed = 3

// DecideRefresh decides a change from the payload the nodes run to a new one (both served
// Ignition configs, decoded: DecodePayload of the token Secret's payload or the ConfigMap's
// config) with the rules of today's daemon in HyperShift mode (DecideForDaemon).
func DecideRefresh(current, next []byte) (Verdict, error) {
	changes, err := diffServed(current, next)
	if err != nil {
		return Verdict{}, err
	}
	return VerdictOf(DecideForDaemon(changes)), nil
}

// DecideRefreshWithPolicies is DecideRefresh for a daemon that reads node disruption policies
// (refresh.DefaultPolicies, or refresh.MergePolicies of the cluster's).
func DecideRefreshWithPolicies(current, next []byte, policies refresh.Policies) (Verdict, error) {
	changes, err := diffServed(current, next)
	if err != nil {
		return Verdict{}, err
	}
	return VerdictOf(refresh.Decide(changes, policies)), nil
}

func diffServed(current, next []byte) ([]refresh.Change, error) {
	oldCfg, err := refresh.FromServed(current)
	if err != nil {
		return nil, fmt.Errorf("current payload: %v", err)
	}
	newCfg, err := refresh.FromServed(next)
	if err != nil {
		return nil, fmt.Errorf("new payload: %v", err)
	}
	return refresh.Diff(oldCfg, newCfg)
}

// VerdictOf reads a decision as a refresh controller must: only NoChange and InPlace without a
// Drain are a refresh.
func VerdictOf(res refresh.Result) Verdict {
	v := Verdict{Result: res}
	switch res.Outcome {
	case refresh.NoChange:
		v.Refresh, v.Reason, v.Message = true, ReasonNoChange, "The nodes' MachineConfig does not change: nothing to apply"
	case refresh.Reject:
		v.Reason = ReasonRejected
		v.Message = "Cannot be applied to a running node: " + named(res, func(c refresh.ChangeDecision) bool { return c.Decision == refresh.Reject })
	case refresh.Reboot:
		v.Reason = ReasonNeedsReboot
		v.Message = "Needs a reboot: " + named(res, func(c refresh.ChangeDecision) bool { return c.Decision == refresh.Reboot })
	default:
		if drains := named(res, needsDrain); drains != "" {
			v.Reason = ReasonNeedsDrain
			v.Message = "Needs a drain, which a refresh never does: " + drains
			break
		}
		v.Refresh, v.Reason = true, ReasonRefreshable
		v.Message = "Applied in place with no drain and no reboot"
		if len(res.Actions) > 0 {
			var then []string
			for _, a := range res.Actions {
				then = append(then, strings.TrimSpace(string(a.Type)+" "+a.Unit))
			}
			v.Message += ", then " + strings.Join(then, ", ")
		}
	}
	return v
}

func needsDrain(c refresh.ChangeDecision) bool {
	for _, a := range c.Actions {
		if a.Type == refresh.ActionDrain {
			return true
		}
	}
	return false
}

// named lists the changes that match, at most maxNamed of them, each with its rule.
func named(res refresh.Result, match func(refresh.ChangeDecision) bool) string {
	var out []string
	n := 0
	for _, c := range res.Changes {
		if !match(c) {
			continue
		}
		if n++; n <= maxNamed {
			out = append(out, fmt.Sprintf("%s %s (%s)", c.Kind, c.Name, c.Rule))
		}
	}
	if n > maxNamed {
		out = append(out, fmt.Sprintf("and %d more", n-maxNamed))
	}
	return strings.Join(out, "; ")
}
