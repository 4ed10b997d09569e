package refresh

import (
	"fmt"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
)

// Outcome is what to do with a node for a config change.
type Outcome string

// Outcomes.
const (
	NoChange Outcome = "NoChange" // the configs are equivalent
	InPlace  Outcome = "InPlace"  // write the files, then run the actions
	Reboot   Outcome = "Reboot"   // the change needs a reboot (or new nodes)
	Reject   Outcome = "Reject"   // the change cannot be applied to an existing node at all
)

// ActionType is a post-write action.
type ActionType string

// Action types, in the order they run.
const (
	ActionDrain        ActionType = "Drain"
	ActionDaemonReload ActionType = "DaemonReload"
	ActionRestart      ActionType = "Restart"
	ActionReload       ActionType = "Reload"
)

// Action is one post-write action.
type Action struct {
	Type ActionType `json:"type"`
	Unit string     `json:"unit,omitempty"`
}

// ChangeDecision is a change with the decision taken for it and the rule that took it.
type ChangeDecision struct {
	Kind     Kind    `json:"kind"`
	Name     string  `json:"name"`
	Decision Outcome `json:"decision"`
	Rule     string  `json:"rule"`
}

// Result is the decision for a whole config change.
type Result struct {
	Outcome Outcome          `json:"outcome"`
	Actions []Action         `json:"actions"`
	Changes []ChangeDecision `json:"changes"`
}

// verdict is the decision for one change.
type verdict struct {
	outcome Outcome
	rule    string
	actions []Action
}

// fileRules decides a file change; Decide uses the policies, DecideWithNoRebootPaths a list.
type fileRules func(Change) verdict

// Decide decides a config change with node disruption policies.
func Decide(changes []Change, policies Policies) Result {
	return decide(changes, policies, func(c Change) verdict { return filePolicyVerdict(policies, c) })
}

func decide(changes []Change, policies Policies, files fileRules) Result {
	res := Result{Outcome: NoChange, Actions: []Action{}, Changes: []ChangeDecision{}}
	var actions []Action
	for _, c := range changes {
		v := judge(c, policies, files)
		res.Changes = append(res.Changes, ChangeDecision{Kind: c.Kind, Name: c.Name, Decision: v.outcome, Rule: v.rule})
		res.Outcome = worse(res.Outcome, v.outcome)
		actions = append(actions, v.actions...)
	}
	if res.Outcome == InPlace {
		res.Actions = orderActions(actions)
	}
	return res
}

// judge applies the fixed rules first: reboot triggers and changes that cannot be applied are
// never decided by a policy or a path list.
func judge(c Change, policies Policies, files fileRules) verdict {
	switch c.Kind {
	case KindOSImage, KindFIPS, KindKernelType, KindExtensions:
		return verdict{outcome: Reboot, rule: fmt.Sprintf("a %s change always reboots", c.Kind)}
	case KindKernelArguments:
		if c.Name == "ignition.kernelArguments" {
			return verdict{outcome: Reject, rule: "Ignition kernelArguments cannot be applied to a running node"}
		}
		return verdict{outcome: Reboot, rule: "a kernelArguments change always reboots"}
	case KindDirectory:
		return verdict{outcome: Reject, rule: "directories cannot be changed on a running node"}
	case KindLink:
		if c.What == "added" || c.What == "changed" {
			return verdict{outcome: Reject, rule: "links cannot be added or changed on a running node"}
		}
		return verdict{outcome: Reboot, rule: "no policy covers removing a link"}
	case KindStorage:
		return verdict{outcome: Reject, rule: "disks, filesystems, RAID and LUKS cannot be changed on a running node"}
	case KindPasswd:
		if c.Name == CoreUser && c.What == "passwordHash" {
			return policyVerdict("sshkey policy (core's password hash)", policies.SSHKey.Actions)
		}
		return verdict{outcome: Reject, rule: "only user core's ssh keys and password can be changed on a running node"}
	case KindSSHKey:
		return policyVerdict("sshkey policy", policies.SSHKey.Actions)
	case KindUnit:
		for _, u := range policies.Units {
			if string(u.Name) == c.Name {
				return policyVerdict("unit policy "+c.Name, u.Actions)
			}
		}
		return verdict{outcome: Reboot, rule: "no unit policy for " + c.Name}
	case KindFile:
		if c.What == "append" {
			return verdict{outcome: Reject, rule: "files with append cannot be applied to a running node"}
		}
		return files(c)
	}
	return verdict{outcome: Reboot, rule: "unknown change"}
}

func filePolicyVerdict(policies Policies, c Change) verdict {
	p, ok := matchFile(policies, c.Name)
	if !ok {
		return verdict{outcome: Reboot, rule: "no file policy matches " + c.Name}
	}
	rule := "file policy " + p.Path
	if len(p.Actions) == 1 && p.Actions[0].Type == operatorv1.SpecialStatusAction {
		return registriesVerdict(rule, c)
	}
	return policyVerdict(rule, p.Actions)
}

// policyVerdict turns a policy's actions into a verdict.
func policyVerdict(rule string, actions []operatorv1.NodeDisruptionPolicyStatusAction) verdict {
	v := verdict{outcome: InPlace, rule: rule}
	var names []string
	for _, a := range actions {
		switch a.Type {
		case operatorv1.RebootStatusAction:
			return verdict{outcome: Reboot, rule: rule + ": Reboot"}
		case operatorv1.NoneStatusAction:
		case operatorv1.DrainStatusAction:
			v.actions = append(v.actions, Action{Type: ActionDrain})
		case operatorv1.DaemonReloadStatusAction:
			v.actions = append(v.actions, Action{Type: ActionDaemonReload})
		case operatorv1.RestartStatusAction:
			if a.Restart == nil {
				return verdict{outcome: Reboot, rule: rule + ": Restart without a service"}
			}
			v.actions = append(v.actions, Action{Type: ActionRestart, Unit: string(a.Restart.ServiceName)})
		case operatorv1.ReloadStatusAction:
			if a.Reload == nil {
				return verdict{outcome: Reboot, rule: rule + ": Reload without a service"}
			}
			v.actions = append(v.actions, Action{Type: ActionReload, Unit: string(a.Reload.ServiceName)})
		default:
			return verdict{outcome: Reboot, rule: fmt.Sprintf("%s: action %q is not understood", rule, a.Type)}
		}
		names = append(names, string(a.Type))
	}
	v.rule = rule + ": " + strings.Join(names, ", ")
	return v
}

// orderActions puts Drain first, then DaemonReload once, then the restarts and reloads in the
// order they came, without duplicates; a Reload of a unit that is also Restarted is dropped.
func orderActions(in []Action) []Action {
	out := []Action{}
	restarted := map[string]bool{}
	hasDrain, hasDaemonReload := false, false
	for _, a := range in {
		switch a.Type {
		case ActionDrain:
			hasDrain = true
		case ActionDaemonReload:
			hasDaemonReload = true
		case ActionRestart:
			restarted[a.Unit] = true
		}
	}
	if hasDrain {
		out = append(out, Action{Type: ActionDrain})
	}
	if hasDaemonReload {
		out = append(out, Action{Type: ActionDaemonReload})
	}
	seen := map[Action]bool{}
	for _, a := range in {
		if a.Type == ActionDrain || a.Type == ActionDaemonReload || seen[a] || (a.Type == ActionReload && restarted[a.Unit]) {
			continue
		}
		seen[a] = true
		out = append(out, a)
	}
	return out
}

var severity = map[Outcome]int{NoChange: 0, InPlace: 1, Reboot: 2, Reject: 3}

func worse(a, b Outcome) Outcome {
	if severity[b] > severity[a] {
		return b
	}
	return a
}
