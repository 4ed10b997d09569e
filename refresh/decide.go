package refresh

import (
	"errors"
	"fmt"
	"path"
	"slices"
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

// Action types.
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

// ChangeDecision is a change with the decision taken for it, the rule that took it and the
// actions it asks for (a Drain among them says this change is why the node drains).
type ChangeDecision struct {
	Kind     Kind     `json:"kind"`
	Name     string   `json:"name"`
	Decision Outcome  `json:"decision"`
	Rule     string   `json:"rule"`
	Actions  []Action `json:"actions,omitempty"`
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
	// unlessDrained, when set, says why the change is refused unless the node drains anyway
	// (another change reboots or drains it): the daemon then never asks whether it is safe.
	unlessDrained string
}

// Decide decides a config change with node disruption policies, as the MCO daemon does: the worst
// change decides the outcome; when every change applies in place, the actions are those of the
// matched policies in the order the policies list them (files, then units, then ssh keys), every
// one kept, an action shared by several policies merged where that keeps each policy's order, and
// a Drain, which the MCO performs before writing anything, first.
func Decide(changes []Change, policies Policies) Result { return decide(changes, policies, nil) }

// decide is Decide with the storage sections the admin lets through
// (spec.irreconcilableValidationOverrides.storage of MachineConfiguration/cluster).
func decide(changes []Change, policies Policies, storageOverrides []operatorv1.IrreconcilableValidationOverridesStorage) Result {
	files := cleanFilePolicies(policies.Files)
	res := Result{Outcome: NoChange, Actions: []Action{}, Changes: []ChangeDecision{}}
	drain := false
	var actions []Action
	var undecided []int // changes refused unless the node drains anyway
	for _, c := range changes {
		v := judge(c, policies, files)
		if c.Kind == KindStorage && overridden(storageOverrides, c.Name) {
			v = verdict{outcome: InPlace, rule: c.Name + " changes are let through by spec.irreconcilableValidationOverrides.storage and not applied to a running node"}
		}
		if v.unlessDrained != "" {
			undecided = append(undecided, len(res.Changes))
		}
		res.Changes = append(res.Changes, ChangeDecision{Kind: c.Kind, Name: c.Name, Decision: v.outcome, Rule: v.rule, Actions: v.actions})
		res.Outcome = worse(res.Outcome, v.outcome)
		var others []Action
		for _, a := range v.actions {
			if a.Type == ActionDrain {
				drain = true
			} else {
				others = append(others, a)
			}
		}
		actions = mergeActions(actions, others)
	}
	// As the MCO: a reboot or another change's Drain drains the node without looking inside
	// registries.conf; otherwise the daemon must read it to decide, and fails when it cannot.
	for _, i := range undecided {
		c := &res.Changes[i]
		if res.Outcome == Reboot || drain {
			c.Rule += ": applied, since the node drains anyway for another change"
			continue
		}
		c.Decision, c.Rule, c.Actions = Reject, c.Rule+": so the daemon cannot tell whether a drain is needed and fails the update", nil
		res.Outcome = Reject
	}
	if res.Outcome == InPlace {
		if drain {
			res.Actions = append(res.Actions, Action{Type: ActionDrain})
		}
		res.Actions = append(res.Actions, actions...)
	}
	return res
}

// overridden says whether the storage section (a KindStorage change's name) is among overrides,
// as the daemon's isConfigReconcilable reads them.
func overridden(overrides []operatorv1.IrreconcilableValidationOverridesStorage, section string) bool {
	want := map[string]operatorv1.IrreconcilableValidationOverridesStorage{
		"disks":       operatorv1.IrreconcilableValidationOverridesStorageDisks,
		"filesystems": operatorv1.IrreconcilableValidationOverridesStorageFileSystems,
		"raid":        operatorv1.IrreconcilableValidationOverridesStorageRaid,
	}[section]
	return want != "" && slices.Contains(overrides, want)
}

// mergeActions appends next to acc keeping the order of both: an action of next is taken from
// acc when acc has it after the last one taken, else appended. So ten files under one policy
// reload crio once, and a Reload and a Restart of crio both run.
func mergeActions(acc, next []Action) []Action {
	cursor := 0
	for _, a := range next {
		if i := slices.Index(acc[cursor:], a); i >= 0 {
			cursor += i + 1
			continue
		}
		acc = append(acc, a)
		cursor = len(acc)
	}
	return acc
}

// judge applies the fixed rules first: reboot triggers and changes that cannot be applied are
// never decided by a policy.
func judge(c Change, policies Policies, files filePolicies) verdict {
	switch c.Kind {
	case KindOSImage, KindKernelType, KindExtensions:
		return verdict{outcome: Reboot, rule: fmt.Sprintf("a %s change always reboots", c.Kind)}
	case KindFIPS:
		return verdict{outcome: Reject, rule: "a fips change is refused: FIPS cannot be changed on a running cluster"}
	case KindKernelArguments:
		if c.Name == "ignition.kernelArguments" {
			return verdict{outcome: Reject, rule: "Ignition kernelArguments cannot be applied to a running node"}
		}
		return verdict{outcome: Reboot, rule: "a kernelArguments change always reboots"}
	case KindDirectory:
		return verdict{outcome: Reject, rule: "directories cannot be changed on a running node"}
	case KindLink:
		if c.What == "removed" {
			return verdict{outcome: InPlace, rule: "links may be removed when none remain, with no action"}
		}
		return verdict{outcome: Reject, rule: "links cannot be added or changed on a running node, nor removed while others remain"}
	case KindStorage:
		if c.Name == "luks" {
			return verdict{outcome: InPlace, rule: "LUKS and Tang changes are accepted and not applied to a running node"}
		}
		return verdict{outcome: Reject, rule: "disks, filesystems and RAID cannot be changed on a running node"}
	case KindPasswd:
		if c.What == "removed" {
			return policyVerdict("sshkey policy (user "+c.Name+" removed, its password cleared)", policies.SSHKey.Actions)
		}
		if rule, ok := passwdRejections[c.What]; ok {
			return verdict{outcome: Reject, rule: rule}
		}
		return verdict{outcome: Reject, rule: "user " + c.Name + " cannot be changed on a running node"}
	case KindSSHKey:
		return policyVerdict("sshkey policy (core's "+c.What+")", policies.SSHKey.Actions)
	case KindUnit:
		for _, u := range policies.Units {
			if string(u.Name) == c.Name {
				return policyVerdict("unit policy "+c.Name, u.Actions)
			}
		}
		return verdict{outcome: Reboot, rule: "no unit policy for " + c.Name}
	case KindFile:
		if path.Clean(c.Name) == forceFile && c.What != "removed" {
			return verdict{outcome: Reject, rule: forceFile + " cannot be written by a config"}
		}
		if strings.HasPrefix(c.What, "append") {
			return verdict{outcome: Reject, rule: "files with append cannot be applied to a running node"}
		}
		if c.specialMode != nil {
			return verdict{outcome: Reject, rule: fmt.Sprintf("file %s has mode %#o: a config cannot set setuid, setgid or sticky bits (modes above 0777)", c.Name, *c.specialMode)}
		}
		// Whatever the policy (Reboot, Drain or Special), a registries.conf crio cannot load must
		// not reach a node: crio would not start again.
		if path.Clean(c.Name) == registriesConf && c.What != "removed" && !c.remote {
			if err := checkRegistriesLoad(c.New); err != nil {
				return verdict{outcome: Reject, rule: err.Error()}
			}
		}
		return filePolicyVerdict(files, c)
	}
	return verdict{outcome: Reboot, rule: "unknown change"}
}

// passwdRejections explain the passwd changes that cannot be applied, by Change.What.
var passwdRejections = map[string]string{
	"groups":         "groups cannot be changed on a running node",
	"notCore":        "only user core can be configured on a running node",
	"coreOtherField": "only core's ssh keys and password hash can be changed on a running node",
	"coreNoLogin":    "core must keep at least one ssh key or a password hash",
}

func filePolicyVerdict(files filePolicies, c Change) verdict {
	p, ok := files.match(c.Name)
	if !ok {
		return verdict{outcome: Reboot, rule: "no file policy matches " + c.Name}
	}
	v := policyVerdict("file policy "+p.Path, p.Actions)
	special := slices.ContainsFunc(p.Actions, func(a operatorv1.NodeDisruptionPolicyStatusAction) bool {
		return a.Type == operatorv1.SpecialStatusAction
	})
	if v.outcome != InPlace || !special || path.Clean(c.Name) != registriesConf {
		return v
	}
	if c.remote {
		return verdict{outcome: Reject, rule: v.rule + ": a remote source cannot be read to decide on a drain"}
	}
	drain, why, err := registriesNeedDrain(c.Old, c.New)
	var unreadable currentUnreadable
	if errors.As(err, &unreadable) {
		v.rule = fmt.Sprintf("%s: %v", v.rule, err)
		v.unlessDrained = err.Error()
		return v
	}
	if err != nil {
		return verdict{outcome: Reject, rule: fmt.Sprintf("%s: %v", v.rule, err)}
	}
	if drain {
		v.actions = append([]Action{{Type: ActionDrain}}, v.actions...)
		v.rule += " with Drain (" + why + ")"
	} else {
		v.rule += " without Drain (" + why + ")"
	}
	return v
}

// policyVerdict turns a policy's actions into a verdict. Special, reserved to registries.conf,
// reloads crio.
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
		case operatorv1.SpecialStatusAction:
			v.actions = append(v.actions, Action{Type: ActionReload, Unit: "crio.service"})
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
	if len(names) > 0 {
		v.rule = rule + ": " + strings.Join(names, ", ")
	}
	return v
}

var severity = map[Outcome]int{NoChange: 0, InPlace: 1, Reboot: 2, Reject: 3}

func worse(a, b Outcome) Outcome {
	if severity[b] > severity[a] {
		return b
	}
	return a
}
