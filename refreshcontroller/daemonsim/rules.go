package daemonsim

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"github.com/vincent-petithory/dataurl"
)

// The daemon's own rules, written from its table (the MCO's calculatePostConfigChangeActionFromMCDiffs
// and syncNodeHypershift as docs/hypershift.md and the domain notes describe them), and on
// purpose sharing no code with refresh/: a mistake there then shows in a spec as a reboot, a
// drain or a wrong file, instead of being agreed with.

// Outcomes, worst last; the names are the ones the controller's verdicts use.
const (
	NoChange    = "NoChange"
	Refreshable = "Refreshable"
	NeedsDrain  = "NeedsDrain"
	NeedsReboot = "NeedsReboot"
	Rejected    = "Rejected"
)

var severity = map[string]int{NoChange: 0, Refreshable: 1, NeedsDrain: 2, NeedsReboot: 3, Rejected: 4}

// verdict is what the daemon does with a new config, the change that decided it, and the
// service actions it runs once the files are written (Refreshable only), in order.
type verdict struct {
	outcome, why string
	actions      []string
}

func (v *verdict) worsen(outcome, why string) {
	if severity[outcome] > severity[v.outcome] {
		v.outcome, v.why = outcome, why
	}
}

// then adds actions to run after the write, each once, in the order first asked.
func (v *verdict) then(actions ...string) {
	for _, a := range actions {
		if !slices.Contains(v.actions, a) {
			v.actions = append(v.actions, a)
		}
	}
}

// Service actions, as the daemon names what it runs.
const (
	reloadCrio     = "Reload crio.service"
	restartCATrust = "Restart coreos-update-ca-trust.service"
	restartCrio    = "Restart crio.service"
	restartKubelet = "Restart kubelet.service"
	proxyEnvFile   = "/etc/mco/proxy.env"
	userCABundle   = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
	registriesConf = "/etc/containers/registries.conf"
)

// decode reads the ConfigMap's config key: base64 of gzip of the served Ignition.
func decode(config string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(config)
	if err != nil {
		return nil, fmt.Errorf("config is not base64: %v", err)
	}
	r, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("config is not gzip: %v", err)
	}
	return io.ReadAll(r)
}

// embedded returns the MachineConfig a served Ignition carries, as the daemon reads it.
func embedded(served []byte) (*mcfgv1.MachineConfig, *ign.Config, error) {
	var cfg ign.Config
	if err := json.Unmarshal(served, &cfg); err != nil {
		return nil, nil, err
	}
	for _, f := range cfg.Storage.Files {
		if f.Path != "/etc/mcs-machine-config-content.json" || f.Contents.Source == nil {
			continue
		}
		du, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			return nil, nil, err
		}
		var mc mcfgv1.MachineConfig
		if err := json.Unmarshal(du.Data, &mc); err != nil {
			return nil, nil, err
		}
		var ic ign.Config
		if err := json.Unmarshal(mc.Spec.Config.Raw, &ic); err != nil {
			return nil, nil, err
		}
		return &mc, &ic, nil
	}
	return nil, nil, fmt.Errorf("no served MachineConfig in the payload")
}

// decide diffs the MachineConfig the node runs against the new one, as the daemon in HyperShift
// mode does. canRestart is a daemon that runs Restart actions (it says so on its node).
func decide(current, next []byte, canRestart bool) (verdict, error) {
	oldMC, oldCfg, err := embedded(current)
	if err != nil {
		return verdict{}, fmt.Errorf("current config: %v", err)
	}
	newMC, newCfg, err := embedded(next)
	if err != nil {
		return verdict{}, fmt.Errorf("new config: %v", err)
	}
	v := verdict{outcome: NoChange}
	o, n := oldMC.Spec, newMC.Spec
	if o.FIPS != n.FIPS {
		v.worsen(Rejected, "FIPS cannot change on a running node")
	}
	kernelType := func(t string) string { return strings.TrimPrefix(t, "default") }
	switch {
	case o.OSImageURL != n.OSImageURL:
		v.worsen(NeedsReboot, "osImageURL")
	case !slices.Equal(o.KernelArguments, n.KernelArguments):
		v.worsen(NeedsReboot, "kernelArguments")
	case kernelType(o.KernelType) != kernelType(n.KernelType):
		v.worsen(NeedsReboot, "kernelType")
	case !slices.Equal(o.Extensions, n.Extensions):
		v.worsen(NeedsReboot, "extensions")
	}
	if !reflect.DeepEqual(oldCfg.Systemd, newCfg.Systemd) {
		v.worsen(NeedsReboot, "systemd units")
	}
	o2, n2 := oldCfg.Storage, newCfg.Storage
	o2.Files, n2.Files = nil, nil
	if !reflect.DeepEqual(o2, n2) {
		v.worsen(Rejected, "directories, links or disks")
	}
	decidePasswd(&v, oldCfg.Passwd, newCfg.Passwd)
	if err := decideFiles(&v, oldCfg.Storage.Files, newCfg.Storage.Files, canRestart); err != nil {
		return verdict{}, err
	}
	return v, nil
}

// decidePasswd: core's ssh keys change in place; any other user change needs a reboot.
func decidePasswd(v *verdict, o, n ign.Passwd) {
	if !reflect.DeepEqual(o.Groups, n.Groups) {
		v.worsen(NeedsReboot, "groups")
	}
	keys := func(p ign.Passwd) (core []ign.SSHAuthorizedKey, rest []ign.PasswdUser) {
		for _, u := range p.Users {
			if u.Name == "core" {
				core = u.SSHAuthorizedKeys
				u.SSHAuthorizedKeys = nil
			}
			rest = append(rest, u)
		}
		return core, rest
	}
	oldKeys, oldRest := keys(o)
	newKeys, newRest := keys(n)
	if !reflect.DeepEqual(oldRest, newRest) {
		v.worsen(NeedsReboot, "users")
	}
	if !slices.Equal(oldKeys, newKeys) {
		v.worsen(Refreshable, "core's ssh keys")
	}
}

// decideFiles compares decoded contents and mode, so an encoding change is no change.
func decideFiles(v *verdict, o, n []ign.File, canRestart bool) error {
	oldFiles, err := fileMap(o)
	if err != nil {
		return err
	}
	newFiles, err := fileMap(n)
	if err != nil {
		return err
	}
	// In path order, so the actions' order does not depend on a map's.
	for _, p := range slices.Sorted(maps.Keys(mergedKeys(oldFiles, newFiles))) {
		before, had := oldFiles[p]
		after, has := newFiles[p]
		if had == has && before == after {
			continue
		}
		outcome, actions := fileRule(p, before.data, after.data, canRestart)
		v.worsen(outcome, p)
		v.then(actions...)
	}
	return nil
}

type fileState struct {
	data string
	mode int
}

func fileMap(files []ign.File) (map[string]fileState, error) {
	m := map[string]fileState{}
	for _, f := range files {
		s := fileState{}
		if f.Mode != nil {
			s.mode = *f.Mode
		}
		if f.Contents.Source != nil {
			du, err := dataurl.DecodeString(*f.Contents.Source)
			if err != nil {
				return nil, fmt.Errorf("file %s: %v", f.Path, err)
			}
			s.data = string(du.Data)
		}
		m[path.Clean(f.Path)] = s
	}
	return m, nil
}

func mergedKeys(a, b map[string]fileState) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}

// fileRule is the daemon's table for one changed file: the outcome, and the service actions a
// refresh of it runs.
func fileRule(p, before, after string, canRestart bool) (string, []string) {
	switch {
	case p == "/var/lib/kubelet/config.json", p == "/etc/kubernetes/kubelet-ca.crt", path.Dir(p) == "/etc/nmstate/openshift":
		return Refreshable, nil // None
	case p == "/etc/containers/policy.json", p == "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
		path.Dir(p) == "/etc/containers/registries.d":
		return Refreshable, []string{reloadCrio}
	case p == registriesConf:
		if safeRegistriesChange(before, after) {
			return Refreshable, []string{reloadCrio}
		}
		return NeedsDrain, nil
	case p == userCABundle && canRestart:
		return Refreshable, []string{restartCATrust, restartCrio}
	case p == proxyEnvFile && canRestart:
		// crio and the kubelet read it as an EnvironmentFile, only when they start.
		return Refreshable, []string{restartCrio, restartKubelet}
	}
	// The CA bundle's and the proxy's restarts are not run by today's HyperShift sync: it reboots.
	return NeedsReboot, nil
}

// safeRegistriesChange: only mirror tables added, each pulling by digest only. Read as blocks of
// TOML tables, not parsed: the stand-in needs only the cases the specs make, and an unknown
// shape is unsafe.
func safeRegistriesChange(before, after string) bool {
	oldBlocks, newBlocks := tomlBlocks(before), tomlBlocks(after)
	for b := range oldBlocks {
		if !newBlocks[b] {
			return false
		}
	}
	for b := range newBlocks {
		if oldBlocks[b] {
			continue
		}
		if !strings.HasPrefix(b, "[[registry.mirror]]") || !strings.Contains(b, `pull-from-mirror = "digest-only"`) {
			return false
		}
	}
	return true
}

func tomlBlocks(s string) map[string]bool {
	blocks := map[string]bool{}
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			blocks[strings.Join(cur, "\n")] = true
		}
		cur = nil
	}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			flush()
		}
		cur = append(cur, line)
	}
	flush()
	return blocks
}
