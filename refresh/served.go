package refresh

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"github.com/vincent-petithory/dataurl"
)

// servedMachineConfigPath is the file of a served Ignition config that holds the rendered
// MachineConfig, as JSON in a data URL: the daemon in HyperShift mode takes the desired config
// from it.
const servedMachineConfigPath = "/etc/mcs-machine-config-content.json"

// servedMachineConfig returns the MachineConfig inside a served Ignition config (the payload of
// HyperShift's token Secret and upgrade ConfigMap, decoded), read as the daemon reads it: the
// file servedMachineConfigPath, its data URL decoded, the JSON a MachineConfig.
func servedMachineConfig(payload []byte) (*mcfgv1.MachineConfig, error) {
	if len(payload) == 0 {
		return nil, errors.New("empty payload: no served config")
	}
	ic, err := parseIgnition(payload)
	if err != nil {
		return nil, fmt.Errorf("served config: %v", err)
	}
	for _, f := range ic.Storage.Files {
		if f.Path != servedMachineConfigPath {
			continue
		}
		// The server writes it plain; the daemon does not decompress it, so neither do we.
		if c := ptrString(f.Contents.Compression, "%s"); c != "" {
			return nil, fmt.Errorf("served config: %s has compression %q, which the daemon does not read", servedMachineConfigPath, c)
		}
		if f.Contents.Source == nil || !strings.HasPrefix(*f.Contents.Source, "data:") {
			return nil, fmt.Errorf("served config: %s has no data URL contents", servedMachineConfigPath)
		}
		du, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			return nil, fmt.Errorf("served config: %s is not a valid data URL: %v", servedMachineConfigPath, err)
		}
		var probe struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(du.Data, &probe); err != nil {
			return nil, fmt.Errorf("served config: %s is not a MachineConfig: %v", servedMachineConfigPath, err)
		}
		if probe.Kind != "" && probe.Kind != "MachineConfig" {
			return nil, fmt.Errorf("served config: %s holds a %s, not a MachineConfig", servedMachineConfigPath, probe.Kind)
		}
		var mc mcfgv1.MachineConfig
		if err := json.Unmarshal(du.Data, &mc); err != nil {
			return nil, fmt.Errorf("served config: %s is not a MachineConfig: %v", servedMachineConfigPath, err)
		}
		return &mc, nil
	}
	return nil, fmt.Errorf("served config: no file %s, so this is not a config the machine config server served", servedMachineConfigPath)
}

// FromServed reads a served Ignition config (the payload of HyperShift's token Secret and
// upgrade ConfigMap, decoded) as the daemon in HyperShift mode sees it: the MachineConfig
// embedded at /etc/mcs-machine-config-content.json. The files the server adds around it (that
// file itself, /etc/ignition-machine-config-encapsulated.json, /etc/kubernetes/kubeconfig,
// /etc/kubernetes/kubelet-ca.crt, /etc/machine-config-daemon/node-annotations.json) are not part
// of it, as the daemon never diffs them.
func FromServed(payload []byte) (Config, error) {
	mc, err := servedMachineConfig(payload)
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
		if f.Path == servedMachineConfigPath {
			return true
		}
	}
	return false
}
