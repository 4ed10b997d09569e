// Package refresh decides whether a change of a worker's config can be applied in place, without
// a reboot, and which service actions follow: the rules of the MCO's Node Disruption Policies,
// shared by the MCO and HyperShift so the two cannot drift. It is pure: configs in, decisions out.
//
// The MCO daemon holds two rendered MachineConfigs and its cluster policies; one call decides:
//
//	result, err := refresh.DecideMachineConfigs(oldConfig, newConfig, clusterPolicies)
//
// Underneath, each kind of input has one way in, and every decision is Diff then Decide:
//
//	a rendered MachineConfig                       FromMachineConfig
//	a bare Ignition config (JSON)                  FromIgnition
//	a config the machine config server served      FromServed
//	a file holding any of these                    Parse
//
//	changes, err := refresh.Diff(current, next)
//	result := refresh.Decide(changes, policies) // DefaultPolicies, or MergePolicies(spec)
//
// Decisions go out as this package's own types: no Ignition type is part of the API, so an
// importer's version of Ignition never has to match this module's. HyperShift's upgrade
// ConfigMap, hashes and refresh verdicts are in refresh/hypershift; the pool planner is in
// refresh/pool; rendering MachineConfigs as the MCO does is refresh/render.
package refresh

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"
	ign35 "github.com/coreos/ignition/v2/config/v3_5"
	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"sigs.k8s.io/yaml"
)

// Config is a node's configuration: its Ignition config and the MachineConfig fields that live
// outside Ignition. Build one with FromMachineConfig, FromIgnition or Parse; the zero Config is
// the empty one.
type Config struct {
	c nodeConfig
}

// nodeConfig holds the Ignition config in spec 3.5, the newest the MCO reads (and the one its
// types package exists in every Ignition release since 2.20).
type nodeConfig struct {
	Ignition        ign.Config
	OSImageURL      string
	KernelArguments []string
	FIPS            bool
	KernelType      string
	Extensions      []string
}

// IgnitionVersion is the newest Ignition spec a config may have: the MCO's, whose daemon refuses
// newer ones (3.6 included) as an unknown version.
const IgnitionVersion = "3.5.0"

// FromMachineConfig reads a MachineConfig: its spec fields and its Ignition config of any spec
// from 3.0.0 to IgnitionVersion.
func FromMachineConfig(mc *mcfgv1.MachineConfig) (Config, error) {
	if mc == nil {
		return Config{}, errors.New("no MachineConfig")
	}
	c := nodeConfig{
		OSImageURL: mc.Spec.OSImageURL, KernelArguments: mc.Spec.KernelArguments, FIPS: mc.Spec.FIPS,
		KernelType: mc.Spec.KernelType, Extensions: mc.Spec.Extensions,
	}
	if raw := mc.Spec.Config.Raw; len(raw) > 0 && string(raw) != "null" {
		var err error
		if c.Ignition, err = parseIgnition(raw); err != nil {
			return Config{}, fmt.Errorf("MachineConfig %q spec.config: %v", mc.Name, err)
		}
	}
	return Config{c: c}, nil
}

// FromIgnition reads a bare Ignition config (JSON) of any spec from 3.0.0 to IgnitionVersion.
func FromIgnition(raw []byte) (Config, error) {
	ic, err := parseIgnition(raw)
	if err != nil {
		return Config{}, err
	}
	return Config{c: nodeConfig{Ignition: ic}}, nil
}

// DecideMachineConfigs is the MCO daemon's question in one call: may a node go from the rendered
// MachineConfig it runs (old) to the one it is asked to run (new) without a reboot, under
// clusterPolicies (the daemon's mcop.Status.NodeDisruptionPolicyStatus.ClusterPolicies). It is
// FromMachineConfig of each, Diff and Decide; an error names the config that cannot be read.
// storageOverrides are the daemon's mcop.Spec.IrreconcilableValidationOverrides.Storage: a disks,
// filesystems or RAID change they name is let through with no action, as the daemon does.
func DecideMachineConfigs(old, new *mcfgv1.MachineConfig, clusterPolicies Policies, storageOverrides ...operatorv1.IrreconcilableValidationOverridesStorage) (Result, error) {
	from, err := FromMachineConfig(old)
	if err != nil {
		return Result{}, fmt.Errorf("current config: %v", err)
	}
	to, err := FromMachineConfig(new)
	if err != nil {
		return Result{}, fmt.Errorf("new config: %v", err)
	}
	changes, err := Diff(from, to)
	if err != nil {
		return Result{}, err
	}
	return decide(changes, clusterPolicies, storageOverrides), nil
}

// Diff lists the changes from old to new in a deterministic order: the MachineConfig fields,
// then files, directories, links, units (added, changed, removed, as the MCO runs their actions),
// users and groups, storage, each by name. When anything changed, files the new config may not
// hold (with append, a mode above 0777, or the daemon's force file) are listed last even if
// unchanged: the MCO refuses such a config whatever else it changes.
func Diff(old, new Config) ([]Change, error) { return diffConfigs(old.c, new.c) }

// Parse reads a MachineConfig (machineconfiguration.openshift.io/v1, YAML or JSON) or a bare
// Ignition config, as files hold them. An Ignition config the machine config server served (it
// carries /etc/mcs-machine-config-content.json) is read as FromServed reads it, as the daemon does.
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
		return FromMachineConfig(&mc)
	case len(probe.Ignition) > 0 && isServed(jsonRaw):
		return FromServed(jsonRaw)
	case len(probe.Ignition) > 0:
		return FromIgnition(jsonRaw)
	default:
		return Config{}, fmt.Errorf("neither a MachineConfig nor an Ignition config (no kind: MachineConfig, no ignition section)")
	}
}

// parseIgnition reads an Ignition config of any spec from 3.0.0 to 3.5.0, translated to 3.5.0,
// naming the version it cannot read.
func parseIgnition(raw []byte) (ign.Config, error) {
	cfg, rpt, err := ign35.ParseCompatibleVersion(raw)
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
			return ign.Config{}, fmt.Errorf("unsupported Ignition version %q: only spec 3.0.0 to %s can be read, as in the MCO", probe.Ignition.Version, ign.MaxVersion)
		}
	}
	msg := fmt.Sprintf("invalid Ignition config: %v", err)
	if details := strings.TrimSpace(rpt.String()); details != "" {
		msg += ": " + details
	}
	return ign.Config{}, errors.New(msg)
}
