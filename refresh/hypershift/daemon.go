package hypershift

import (
	"fmt"
	"path"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// fileRule is what a rule set other than node disruption policies says for one changed file.
type fileRule struct {
	// source names the matching entry, in place of "file policy <file>" in the rule.
	source  string
	actions []operatorv1.NodeDisruptionPolicyStatusAction
	// missing is the rule when nothing matches: the file reboots.
	missing string
}

// decideFiles decides changes with policies for units and ssh keys, and with rule for each
// changed file: each file's rule becomes a node disruption policy for exactly that file, so the
// engine's fixed rules (reboot triggers, changes that cannot be applied, registries.conf checks)
// apply unchanged.
func decideFiles(changes []refresh.Change, policies refresh.Policies, rule func(file string) fileRule) refresh.Result {
	exact := refresh.Policies{Units: policies.Units, SSHKey: policies.SSHKey}
	rules := map[string]fileRule{}
	for _, c := range changes {
		file := path.Clean(c.Name)
		if _, seen := rules[file]; c.Kind != refresh.KindFile || seen {
			continue
		}
		r := rule(file)
		rules[file] = r
		actions := r.actions
		if actions == nil {
			actions = []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.RebootStatusAction}}
		}
		exact.Files = append(exact.Files, operatorv1.NodeDisruptionPolicyStatusFile{Path: file, Actions: actions})
	}
	res := refresh.Decide(changes, exact)
	for i := range res.Changes {
		c := &res.Changes[i]
		file := path.Clean(c.Name)
		rest, ok := strings.CutPrefix(c.Rule, "file policy "+file)
		if r, known := rules[file]; c.Kind == refresh.KindFile && known && ok {
			if r.actions == nil {
				c.Rule = r.missing
			} else {
				c.Rule = r.source + rest
			}
		}
	}
	return res
}

// The post-update table of the MCO daemon in HyperShift mode (machine-config-operator 7ff337a4,
// pkg/daemon/update.go calculatePostConfigChangeActionFromMCDiffs): it reads no node disruption
// policy. Folder entries match the files directly inside the folder only (filepath.Dir).
var (
	daemonFiles = map[string]operatorv1.NodeDisruptionPolicyStatusAction{
		"/etc/kubernetes/kubelet-ca.crt":                          none,
		"/var/lib/kubelet/config.json":                            none,
		"/etc/containers/registries.conf":                         {Type: operatorv1.SpecialStatusAction},
		"/etc/machine-config-daemon/no-reboot/containers-gpg.pub": reloadCrio,
		"/etc/containers/policy.json":                             reloadCrio,
	}
	daemonFolders = map[string]operatorv1.NodeDisruptionPolicyStatusAction{
		"/etc/containers/registries.d": reloadCrio,
		"/etc/nmstate/openshift":       none,
	}
	// The table says Restart crio for the user CA bundle, but the HyperShift sync runs only
	// Reboot, None and Reload crio: the file would be written and crio left running on the old
	// bundle, so it is left to a reboot here.
	daemonUnrun = map[string]string{
		"/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt": "Restart crio",
	}
	// Units always reboot; ssh keys are written with no action.
	daemonPolicies = refresh.Policies{SSHKey: operatorv1.NodeDisruptionPolicyStatusSSHKey{
		Actions: []operatorv1.NodeDisruptionPolicyStatusAction{none}}}

	none       = operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.NoneStatusAction}
	reloadCrio = operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.ReloadStatusAction,
		Reload: &operatorv1.ReloadService{ServiceName: "crio.service"}}
)

// DecideForDaemon decides changes with the rules of today's MCO daemon in HyperShift mode, which
// the in-place upgrader runs: a fixed table instead of node disruption policies, in which a unit
// change reboots, an ssh key change needs no action, and only the pull secret, the kubelet CA, the
// container registry and signature files and /etc/nmstate/openshift apply in place. Reboot
// triggers and changes that cannot be applied are decided as always.
func DecideForDaemon(changes []refresh.Change) refresh.Result {
	return decideFiles(changes, daemonPolicies, func(file string) fileRule {
		if action, ok := daemonUnrun[file]; ok {
			return fileRule{missing: fmt.Sprintf("the HyperShift daemon's table says %s for %s, which its sync does not run", action, file)}
		}
		if a, ok := daemonFiles[file]; ok {
			return fileRule{source: "HyperShift daemon table, " + file, actions: []operatorv1.NodeDisruptionPolicyStatusAction{a}}
		}
		if a, ok := daemonFolders[path.Dir(file)]; ok {
			return fileRule{source: "HyperShift daemon table, " + path.Dir(file), actions: []operatorv1.NodeDisruptionPolicyStatusAction{a}}
		}
		return fileRule{missing: "the HyperShift daemon's table has no entry for " + file}
	})
}
