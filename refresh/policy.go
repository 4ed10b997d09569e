package refresh

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
)

// Policies are the node disruption policies in force: the cluster defaults merged with the
// user's, in the shape of MachineConfiguration status.nodeDisruptionPolicyStatus.clusterPolicies.
type Policies = operatorv1.NodeDisruptionPolicyClusterStatus

// RegistriesConf is the file whose default policy is Special: reload crio when registries or
// mirrors are only added, drain first when any is removed or reordered.
const RegistriesConf = "/etc/containers/registries.conf"

func act(t operatorv1.NodeDisruptionPolicyStatusActionType, unit string) operatorv1.NodeDisruptionPolicyStatusAction {
	a := operatorv1.NodeDisruptionPolicyStatusAction{Type: t}
	switch t {
	case operatorv1.ReloadStatusAction:
		a.Reload = &operatorv1.ReloadService{ServiceName: operatorv1.NodeDisruptionPolicyServiceName(unit)}
	case operatorv1.RestartStatusAction:
		a.Restart = &operatorv1.RestartService{ServiceName: operatorv1.NodeDisruptionPolicyServiceName(unit)}
	}
	return a
}

func filePolicy(p string, actions ...operatorv1.NodeDisruptionPolicyStatusAction) operatorv1.NodeDisruptionPolicyStatusFile {
	return operatorv1.NodeDisruptionPolicyStatusFile{Path: p, Actions: actions}
}

// DefaultPolicies are the MCO's cluster defaults.
func DefaultPolicies() Policies {
	none := act(operatorv1.NoneStatusAction, "")
	reloadCrio := act(operatorv1.ReloadStatusAction, "crio.service")
	return Policies{
		Files: []operatorv1.NodeDisruptionPolicyStatusFile{
			filePolicy("/var/lib/kubelet/config.json", none),
			filePolicy(RegistriesConf, act(operatorv1.SpecialStatusAction, "")),
			filePolicy("/etc/containers/registries.d", reloadCrio),
			filePolicy("/etc/containers/policy.json", reloadCrio),
			filePolicy("/etc/crio/policies", reloadCrio),
			filePolicy("/etc/machine-config-daemon/no-reboot/containers-gpg.pub", reloadCrio),
			filePolicy("/etc/nmstate/openshift", none),
			filePolicy("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
				act(operatorv1.RestartStatusAction, "coreos-update-ca-trust.service"), act(operatorv1.RestartStatusAction, "crio.service")),
			filePolicy("/etc/kubernetes/credential-providers", act(operatorv1.RestartStatusAction, "kubelet.service")),
			filePolicy("/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
				act(operatorv1.DaemonReloadStatusAction, ""), act(operatorv1.RestartStatusAction, "kubelet.service")),
		},
		SSHKey: operatorv1.NodeDisruptionPolicyStatusSSHKey{Actions: []operatorv1.NodeDisruptionPolicyStatusAction{none}},
	}
}

// Service names: letters, digits and :._\- with a unit suffix, at most 255 characters.
var serviceName = regexp.MustCompile(`^[a-zA-Z0-9:._\\-]+\.(service|socket|device|mount|automount|swap|target|path|timer|snapshot|slice|scope)$`)

// ValidateServiceName reports whether name is a valid unit name for a policy action.
func ValidateServiceName(name string) error {
	if len(name) > 255 || !serviceName.MatchString(name) {
		return fmt.Errorf("invalid service name %q: letters, digits and :._- with a unit suffix such as .service, at most 255 characters", name)
	}
	return nil
}

// MergePolicies merges the user's spec.nodeDisruptionPolicy into the defaults, as the MCO computes
// status.nodeDisruptionPolicyStatus.clusterPolicies: a user file policy replaces the default of
// the same path, the others are added; files are sorted by path, units by name.
func MergePolicies(user operatorv1.NodeDisruptionPolicyConfig) (Policies, error) {
	if err := ValidatePolicies(user); err != nil {
		return Policies{}, err
	}
	merged := DefaultPolicies()
	byPath := map[string]int{}
	for i, f := range merged.Files {
		byPath[f.Path] = i
	}
	for _, f := range user.Files {
		p := operatorv1.NodeDisruptionPolicyStatusFile{Path: f.Path, Actions: statusActions(f.Actions)}
		if i, ok := byPath[f.Path]; ok {
			merged.Files[i] = p
			continue
		}
		merged.Files = append(merged.Files, p)
	}
	for _, u := range user.Units {
		merged.Units = append(merged.Units, operatorv1.NodeDisruptionPolicyStatusUnit{Name: u.Name, Actions: statusActions(u.Actions)})
	}
	if len(user.SSHKey.Actions) > 0 {
		merged.SSHKey.Actions = statusActions(user.SSHKey.Actions)
	}
	sort.SliceStable(merged.Files, func(i, j int) bool { return merged.Files[i].Path < merged.Files[j].Path })
	sort.SliceStable(merged.Units, func(i, j int) bool { return merged.Units[i].Name < merged.Units[j].Name })
	return merged, nil
}

func statusActions(in []operatorv1.NodeDisruptionPolicySpecAction) []operatorv1.NodeDisruptionPolicyStatusAction {
	out := make([]operatorv1.NodeDisruptionPolicyStatusAction, len(in))
	for i, a := range in {
		out[i] = operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.NodeDisruptionPolicyStatusActionType(a.Type), Reload: a.Reload, Restart: a.Restart}
	}
	return out
}

// ValidatePolicies checks user policies with the API's rules: absolute, clean paths; valid
// service names; Reboot and None stand alone.
func ValidatePolicies(user operatorv1.NodeDisruptionPolicyConfig) error {
	for _, f := range user.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return fmt.Errorf("file policy %q: the path must be absolute and clean", f.Path)
		}
		if err := validateActions("file policy "+f.Path, f.Actions); err != nil {
			return err
		}
	}
	for _, u := range user.Units {
		if err := ValidateServiceName(string(u.Name)); err != nil {
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
			if err := ValidateServiceName(string(a.Reload.ServiceName)); err != nil {
				return fmt.Errorf("%s: %v", where, err)
			}
		case operatorv1.RestartSpecAction:
			if a.Restart == nil {
				return fmt.Errorf("%s: Restart needs restart.serviceName", where)
			}
			if err := ValidateServiceName(string(a.Restart.ServiceName)); err != nil {
				return fmt.Errorf("%s: %v", where, err)
			}
		case operatorv1.DrainSpecAction, operatorv1.DaemonReloadSpecAction:
		default:
			return fmt.Errorf("%s: unknown action %q", where, a.Type)
		}
	}
	return nil
}

// matchFile returns the policy for p: an exact path, or the longest policy path p is below.
func matchFile(policies Policies, p string) (operatorv1.NodeDisruptionPolicyStatusFile, bool) {
	best, found := operatorv1.NodeDisruptionPolicyStatusFile{}, false
	for _, f := range policies.Files {
		if p == f.Path || strings.HasPrefix(p, strings.TrimSuffix(f.Path, "/")+"/") {
			if !found || len(f.Path) > len(best.Path) {
				best, found = f, true
			}
		}
	}
	return best, found
}
