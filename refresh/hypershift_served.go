package refresh

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/vincent-petithory/dataurl"
)

// Files the machine config server adds to the Ignition config it serves, and the daemon's own
// record of what it applied on a HyperShift node.
const (
	// ServedMachineConfigPath holds the rendered MachineConfig the server served, as JSON in a
	// data URL. The daemon in HyperShift mode takes the desired config from this file.
	ServedMachineConfigPath = "/etc/mcs-machine-config-content.json"
	// EncapsulatedConfigPath holds the same MachineConfig with its Ignition config emptied, for
	// the firstboot service.
	EncapsulatedConfigPath = "/etc/ignition-machine-config-encapsulated.json"
	// ServedKubeconfigPath is the kubelet's bootstrap kubeconfig.
	ServedKubeconfigPath = "/etc/kubernetes/kubeconfig"
	// DaemonCurrentConfigPath is where the daemon in HyperShift mode writes the MachineConfig it
	// applied; before the first update it reads ServedMachineConfigPath instead.
	DaemonCurrentConfigPath = "/etc/mcd-currentconfig.json"
)

// ServedMachineConfig returns the MachineConfig inside a served Ignition config (the payload of
// HyperShift's token Secret and upgrade ConfigMap, decoded), read as the daemon reads it: the
// file ServedMachineConfigPath, its data URL decoded, the JSON a MachineConfig.
func ServedMachineConfig(payload []byte) (*mcfgv1.MachineConfig, error) {
	if len(payload) == 0 {
		return nil, errors.New("empty payload: no served config")
	}
	ic, err := parseIgnition(payload)
	if err != nil {
		return nil, fmt.Errorf("served config: %v", err)
	}
	for _, f := range ic.Storage.Files {
		if f.Path != ServedMachineConfigPath {
			continue
		}
		// The server writes it plain; the daemon does not decompress it, so neither do we.
		if c := ptrString(f.Contents.Compression, "%s"); c != "" {
			return nil, fmt.Errorf("served config: %s has compression %q, which the daemon does not read", ServedMachineConfigPath, c)
		}
		if f.Contents.Source == nil || !strings.HasPrefix(*f.Contents.Source, "data:") {
			return nil, fmt.Errorf("served config: %s has no data URL contents", ServedMachineConfigPath)
		}
		du, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			return nil, fmt.Errorf("served config: %s is not a valid data URL: %v", ServedMachineConfigPath, err)
		}
		var probe struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(du.Data, &probe); err != nil {
			return nil, fmt.Errorf("served config: %s is not a MachineConfig: %v", ServedMachineConfigPath, err)
		}
		if probe.Kind != "" && probe.Kind != "MachineConfig" {
			return nil, fmt.Errorf("served config: %s holds a %s, not a MachineConfig", ServedMachineConfigPath, probe.Kind)
		}
		var mc mcfgv1.MachineConfig
		if err := json.Unmarshal(du.Data, &mc); err != nil {
			return nil, fmt.Errorf("served config: %s is not a MachineConfig: %v", ServedMachineConfigPath, err)
		}
		return &mc, nil
	}
	return nil, fmt.Errorf("served config: no file %s, so this is not a config the machine config server served", ServedMachineConfigPath)
}

// FromServed reads a served Ignition config as the daemon in HyperShift mode sees it: the
// MachineConfig embedded at ServedMachineConfigPath. The files the server adds around it
// (that file itself, EncapsulatedConfigPath, ServedKubeconfigPath) are not part of it.
func FromServed(payload []byte) (Config, error) {
	mc, err := ServedMachineConfig(payload)
	if err != nil {
		return Config{}, err
	}
	return FromMachineConfig(mc)
}

// isServed says whether a parsed Ignition config carries the served MachineConfig file.
func isServed(raw []byte) bool {
	var probe struct {
		Storage struct {
			Files []struct {
				Path string `json:"path"`
			} `json:"files"`
		} `json:"storage"`
	}
	if json.Unmarshal(raw, &probe) != nil {
		return false
	}
	for _, f := range probe.Storage.Files {
		if f.Path == ServedMachineConfigPath {
			return true
		}
	}
	return false
}

// DecideServed decides the change from one served payload to another (both decoded: Ignition
// JSON) on their embedded MachineConfigs, as the daemon in HyperShift mode diffs them, with the
// given policies. Use HyperShiftDaemonPolicies for today's daemon.
func DecideServed(old, new []byte, policies Policies) (Result, error) {
	changes, err := diffServed(old, new)
	if err != nil {
		return Result{}, err
	}
	return Decide(changes, policies), nil
}

// DecideServedForHyperShiftDaemon is DecideServed with the rules of today's daemon in HyperShift
// mode (see DecideForHyperShiftDaemon).
func DecideServedForHyperShiftDaemon(old, new []byte) (Result, error) {
	changes, err := diffServed(old, new)
	if err != nil {
		return Result{}, err
	}
	return DecideForHyperShiftDaemon(changes), nil
}

// diffServed lists the changes between the MachineConfigs embedded in two served payloads.
func diffServed(old, new []byte) ([]Change, error) {
	oldCfg, err := FromServed(old)
	if err != nil {
		return nil, fmt.Errorf("current payload: %v", err)
	}
	newCfg, err := FromServed(new)
	if err != nil {
		return nil, fmt.Errorf("new payload: %v", err)
	}
	return Diff(oldCfg, newCfg)
}

// The post-update table of the MCO daemon in HyperShift mode (machine-config-operator 7ff337a4,
// pkg/daemon/update.go calculatePostConfigChangeActionFromMCDiffs): it reads no node disruption
// policy. Folder entries match the files directly inside the folder only (filepath.Dir).
var (
	hyperShiftDaemonFiles = filePolicies{
		filePolicy("/etc/kubernetes/kubelet-ca.crt", none()),
		filePolicy("/var/lib/kubelet/config.json", none()),
		filePolicy(RegistriesConf, operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.SpecialStatusAction}),
		filePolicy("/etc/machine-config-daemon/no-reboot/containers-gpg.pub", reload("crio.service")),
		filePolicy("/etc/containers/policy.json", reload("crio.service")),
	}
	hyperShiftDaemonDirs = filePolicies{
		filePolicy("/etc/containers/registries.d", reload("crio.service")),
		filePolicy("/etc/nmstate/openshift", none()),
	}
	// The table says Restart crio for the user CA bundle, but the HyperShift sync runs only
	// Reboot, None and Reload crio: the file would be written and crio left running on the old
	// bundle, so it is left to a reboot here.
	hyperShiftDaemonUnrun = map[string]string{
		"/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt": "Restart crio",
	}
	// Units always reboot; ssh keys are written with no action.
	hyperShiftDaemonPolicies = Policies{SSHKey: operatorv1.NodeDisruptionPolicyStatusSSHKey{
		Actions: []operatorv1.NodeDisruptionPolicyStatusAction{none()}}}
)

// DecideForHyperShiftDaemon decides changes with the rules of today's MCO daemon in HyperShift
// mode, which the in-place upgrader runs: a fixed table instead of node disruption policies, in
// which a unit change reboots, an ssh key change needs no action, and only the pull secret, the
// kubelet CA, the container registry and signature files and /etc/nmstate/openshift apply in
// place. Reboot triggers and changes that cannot be applied are decided as always.
func DecideForHyperShiftDaemon(changes []Change) Result {
	return decide(changes, hyperShiftDaemonPolicies, func(c Change) verdict {
		name := filepath.Clean(c.Name)
		if action, ok := hyperShiftDaemonUnrun[name]; ok {
			return verdict{outcome: Reboot, rule: fmt.Sprintf("the HyperShift daemon's table says %s for %s, which its sync does not run", action, name)}
		}
		for _, table := range []struct {
			entries filePolicies
			key     string
		}{{hyperShiftDaemonFiles, name}, {hyperShiftDaemonDirs, filepath.Dir(name)}} {
			for _, p := range table.entries {
				if p.Path == table.key {
					v := filePolicyVerdict(filePolicies{p}, c)
					v.rule = "HyperShift daemon table, " + v.rule
					return v
				}
			}
		}
		return verdict{outcome: Reboot, rule: "the HyperShift daemon's table has no entry for " + name}
	})
}
