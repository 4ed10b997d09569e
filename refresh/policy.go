package refresh

import (
	"fmt"
	"path"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh/internal/unitname"
)

// Policies are the node disruption policies in force: the cluster defaults merged with the
// user's, in the shape of MachineConfiguration status.nodeDisruptionPolicyStatus.clusterPolicies.
type Policies = operatorv1.NodeDisruptionPolicyClusterStatus

// MergePolicies merges the user's spec.nodeDisruptionPolicy into the cluster defaults as the MCO
// computes status.nodeDisruptionPolicyStatus.clusterPolicies: the defaults in their order, a user
// policy replacing the one of the same path (cleaned: /etc/foo/ is /etc/foo) or unit in place, the
// others appended in the user's order, and the user's sshkey actions, if any, replacing the default.
func MergePolicies(user operatorv1.NodeDisruptionPolicyConfig) (Policies, error) {
	if err := validatePolicies(user); err != nil {
		return Policies{}, err
	}
	merged := DefaultPolicies()
	for _, f := range user.Files {
		p := operatorv1.NodeDisruptionPolicyStatusFile{Path: path.Clean(f.Path), Actions: statusActions(f.Actions)}
		if i := indexOf(merged.Files, func(d operatorv1.NodeDisruptionPolicyStatusFile) bool { return d.Path == p.Path }); i >= 0 {
			merged.Files[i] = p
		} else {
			merged.Files = append(merged.Files, p)
		}
	}
	for _, u := range user.Units {
		p := operatorv1.NodeDisruptionPolicyStatusUnit{Name: u.Name, Actions: statusActions(u.Actions)}
		if i := indexOf(merged.Units, func(d operatorv1.NodeDisruptionPolicyStatusUnit) bool { return d.Name == p.Name }); i >= 0 {
			merged.Units[i] = p
		} else {
			merged.Units = append(merged.Units, p)
		}
	}
	if len(user.SSHKey.Actions) > 0 {
		merged.SSHKey.Actions = statusActions(user.SSHKey.Actions)
	}
	return merged, nil
}

func indexOf[T any](s []T, match func(T) bool) int {
	for i, v := range s {
		if match(v) {
			return i
		}
	}
	return -1
}

func statusActions(in []operatorv1.NodeDisruptionPolicySpecAction) []operatorv1.NodeDisruptionPolicyStatusAction {
	out := make([]operatorv1.NodeDisruptionPolicyStatusAction, len(in))
	for i, a := range in {
		out[i] = operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.NodeDisruptionPolicyStatusActionType(a.Type), Reload: a.Reload, Restart: a.Restart}
	}
	return out
}

// validatePolicies checks user policies with the API's rules, plus one: a file policy path must be
// absolute (a relative one could never match an Ignition file). Valid service names; Reboot and
// None stand alone.
func validatePolicies(user operatorv1.NodeDisruptionPolicyConfig) error {
	for _, f := range user.Files {
		if !path.IsAbs(f.Path) {
			return fmt.Errorf("file policy %q: the path must be absolute", f.Path)
		}
		if err := validateActions("file policy "+f.Path, f.Actions); err != nil {
			return err
		}
	}
	for _, u := range user.Units {
		if err := unitname.Validate(string(u.Name)); err != nil {
			return fmt.Errorf("unit policy: %v", err)
		}
		if err := validateActions("unit policy "+string(u.Name), u.Actions); err != nil {
			return err
		}
	}
	return validateActions("sshkey policy", user.SSHKey.Actions)
}

func validateActions(where string, actions []operatorv1.NodeDisruptionPolicySpecAction) error {
	for _, a := range actions {
		switch a.Type {
		case operatorv1.RebootSpecAction, operatorv1.NoneSpecAction:
			if len(actions) > 1 {
				return fmt.Errorf("%s: %s must be the only action", where, a.Type)
			}
		case operatorv1.ReloadSpecAction:
			if a.Reload == nil {
				return fmt.Errorf("%s: Reload needs reload.serviceName", where)
			}
			if err := unitname.Validate(string(a.Reload.ServiceName)); err != nil {
				return fmt.Errorf("%s: %v", where, err)
			}
		case operatorv1.RestartSpecAction:
			if a.Restart == nil {
				return fmt.Errorf("%s: Restart needs restart.serviceName", where)
			}
			if err := unitname.Validate(string(a.Restart.ServiceName)); err != nil {
				return fmt.Errorf("%s: %v", where, err)
			}
		case operatorv1.DrainSpecAction, operatorv1.DaemonReloadSpecAction:
		default:
			return fmt.Errorf("%s: unknown action %q", where, a.Type)
		}
	}
	return nil
}

// filePolicies are file policies with cleaned paths, ready to match.
type filePolicies []operatorv1.NodeDisruptionPolicyStatusFile

func cleanFilePolicies(in []operatorv1.NodeDisruptionPolicyStatusFile) filePolicies {
	out := make(filePolicies, len(in))
	for i, f := range in {
		out[i] = operatorv1.NodeDisruptionPolicyStatusFile{Path: path.Clean(f.Path), Actions: f.Actions}
	}
	return out
}

// match returns the policy for file p: its own path, else the longest policy path p is below (the
// first listed on a tie). Like the MCO, a policy for / matches no file.
func (fp filePolicies) match(p string) (operatorv1.NodeDisruptionPolicyStatusFile, bool) {
	p = path.Clean(p)
	best := -1
	for i, f := range fp {
		if (p == f.Path || strings.HasPrefix(p, f.Path+"/")) && (best < 0 || len(f.Path) > len(fp[best].Path)) {
			best = i
		}
	}
	if best < 0 {
		return operatorv1.NodeDisruptionPolicyStatusFile{}, false
	}
	return fp[best], true
}
