// Package refresh decides whether a change of a worker's config can be applied in place, without
// a reboot, and which service actions follow: the rules of the MCO's Node Disruption Policies,
// shared by the MCO and HyperShift so the two cannot drift. It is pure: configs in, decisions out.
package refresh

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	ignconfig "github.com/coreos/ignition/v2/config"
	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"
	ign "github.com/coreos/ignition/v2/config/v3_6_experimental/types"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"sigs.k8s.io/yaml"
)

// Config is a node's configuration: its Ignition config, translated to the newest spec, and the
// MachineConfig fields that live outside Ignition.
type Config struct {
	Ignition        ign.Config
	OSImageURL      string
	KernelArguments []string
	FIPS            bool
	KernelType      string
	Extensions      []string
}

// Parse reads a MachineConfig (machineconfiguration.openshift.io/v1, YAML or JSON) or a bare
// Ignition config of any 3.x version.
func Parse(raw []byte) (Config, error) {
	var probe struct {
		Kind     string          `json:"kind"`
		Ignition json.RawMessage `json:"ignition"`
	}
	jsonRaw, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return Config{}, fmt.Errorf("not YAML or JSON: %v", err)
	}
	if err := json.Unmarshal(jsonRaw, &probe); err != nil {
		return Config{}, fmt.Errorf("not a JSON object: %v", err)
	}
	switch {
	case probe.Kind == "MachineConfig":
		var mc mcfgv1.MachineConfig
		if err := json.Unmarshal(jsonRaw, &mc); err != nil {
			return Config{}, fmt.Errorf("MachineConfig: %v", err)
		}
		cfg := Config{
			OSImageURL: mc.Spec.OSImageURL, KernelArguments: mc.Spec.KernelArguments, FIPS: mc.Spec.FIPS,
			KernelType: mc.Spec.KernelType, Extensions: mc.Spec.Extensions,
		}
		if len(mc.Spec.Config.Raw) > 0 && string(mc.Spec.Config.Raw) != "null" {
			if cfg.Ignition, err = parseIgnition(mc.Spec.Config.Raw); err != nil {
				return Config{}, fmt.Errorf("MachineConfig %q spec.config: %v", mc.Name, err)
			}
		}
		return cfg, nil
	case len(probe.Ignition) > 0:
		ic, err := parseIgnition(jsonRaw)
		return Config{Ignition: ic}, err
	default:
		return Config{}, fmt.Errorf("neither a MachineConfig nor an Ignition config (no kind: MachineConfig, no ignition section)")
	}
}

// parseIgnition reads an Ignition config of any spec 3 version, naming the version it cannot read.
func parseIgnition(raw []byte) (ign.Config, error) {
	cfg, rpt, err := ignconfig.Parse(raw)
	if err == nil {
		return cfg, nil
	}
	var probe struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	if errors.Is(err, ignerrors.ErrUnknownVersion) || errors.Is(err, ignerrors.ErrInvalidVersion) {
		if json.Unmarshal(raw, &probe) == nil && probe.Ignition.Version != "" {
			return ign.Config{}, fmt.Errorf("unsupported Ignition version %q: only spec 3.0.0 to %s can be read", probe.Ignition.Version, ign.MaxVersion)
		}
	}
	msg := fmt.Sprintf("invalid Ignition config: %v", err)
	if details := strings.TrimSpace(rpt.String()); details != "" {
		msg += ": " + details
	}
	return ign.Config{}, errors.New(msg)
}
