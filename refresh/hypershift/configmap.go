package hypershift

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/internal/gzipped"
	"github.com/bootimage-operator/bootimage-operator/refresh/internal/unitname"
)

// Keys of the HyperShift upgrade ConfigMap.
const (
	KeyConfig        = "config"
	KeyHash          = "hash"
	KeyNoRebootPaths = "no-reboot-paths"
)

// NoRebootPath is one entry of the no-reboot-paths key: a file (or, with a trailing /, every file
// below a folder) that may change without a reboot, and what to do after writing it.
type NoRebootPath struct {
	Path     string   `json:"path"`
	Action   string   `json:"action"` // None, Restart or Reload
	Services []string `json:"services,omitempty"`
}

// UpgradeNames returns the namespace and name of a pool's upgrade ConfigMap. HyperShift's pool
// is the MachineSet (named after the NodePool).
func UpgradeNames(pool string) (namespace, name string) { return pool + "-upgrade", pool + "-upgrade" }

// EncodePayload encodes a payload as HyperShift stores it in the token Secret's payload key and
// the upgrade ConfigMap's config key: gzip at best compression, no name and no modification time
// in the header, then standard base64 with padding. An empty payload is the empty string. The
// same payload always gives the same string, so the refresh side and the in-place upgrader never
// see each other's write as a change.
func EncodePayload(payload []byte) (string, error) {
	if len(payload) == 0 {
		return "", nil
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write(payload); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// DecodePayload reverses EncodePayload; the empty string is the empty payload. Output above
// 64 MiB is refused.
func DecodePayload(encoded string) ([]byte, error) {
	if encoded == "" {
		return nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("not base64: %v", err)
	}
	return gzipped.Decompress(raw)
}

// BuildUpgradeConfigMap returns the ConfigMap that carries payload (the served Ignition config,
// encoded by EncodePayload) and its hash to a pool's nodes, with the no-reboot paths if any.
func BuildUpgradeConfigMap(pool string, payload []byte, hash string, paths []NoRebootPath) (*corev1.ConfigMap, error) {
	ns, name := UpgradeNames(pool)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := SetUpgradeConfigMapData(cm, payload, hash, paths); err != nil {
		return nil, err
	}
	return cm, nil
}

// SetUpgradeConfigMapData sets the config, hash and (when paths is not nil) no-reboot-paths keys
// of cm and leaves every other key alone, so an update sends only what changed. It says whether
// anything changed: when not, there is nothing to write.
func SetUpgradeConfigMapData(cm *corev1.ConfigMap, payload []byte, hash string, paths []NoRebootPath) (bool, error) {
	config, err := EncodePayload(payload)
	if err != nil {
		return false, err
	}
	want := map[string]string{KeyConfig: config, KeyHash: hash}
	if paths != nil {
		raw, err := json.Marshal(paths)
		if err != nil {
			return false, err
		}
		want[KeyNoRebootPaths] = string(raw)
	}
	return setEntries(&cm.Data, want), nil
}

// ParseUpgradeConfigMap returns the payload, hash and no-reboot paths of an upgrade ConfigMap.
func ParseUpgradeConfigMap(cm *corev1.ConfigMap) (payload []byte, hash string, paths []NoRebootPath, err error) {
	if payload, err = DecodePayload(cm.Data[KeyConfig]); err != nil {
		return nil, "", nil, fmt.Errorf("ConfigMap %s/%s key %s: %v", cm.Namespace, cm.Name, KeyConfig, err)
	}
	if v, ok := cm.Data[KeyNoRebootPaths]; ok {
		if paths, err = ParseNoRebootPaths([]byte(v)); err != nil {
			return nil, "", nil, fmt.Errorf("ConfigMap %s/%s key %s: %v", cm.Namespace, cm.Name, KeyNoRebootPaths, err)
		}
	}
	return payload, cm.Data[KeyHash], paths, nil
}

// ParseNoRebootPaths reads a no-reboot-paths JSON array.
func ParseNoRebootPaths(raw []byte) ([]NoRebootPath, error) {
	var paths []NoRebootPath
	if err := json.Unmarshal(raw, &paths); err != nil {
		return nil, fmt.Errorf("not a JSON array of {path, action, services}: %v", err)
	}
	return paths, nil
}

// NoRebootPathsFromPolicies expresses the file policies as no-reboot paths, each cleaned policy
// path as a file and as a folder (policies match any depth below their path), in the policies'
// order; a path listed twice keeps its first policy, as matching does. Policies that the format
// cannot express (Reboot, Drain, DaemonReload, Special, Restart mixed with Reload) and a policy
// for /, which matches no file, are left out: their files fall back to a reboot, which is safe.
func NoRebootPathsFromPolicies(policies refresh.Policies) []NoRebootPath {
	out := []NoRebootPath{}
	seen := map[string]bool{}
	for _, f := range policies.Files {
		f.Path = path.Clean(f.Path)
		if f.Path == "/" || seen[f.Path] {
			continue
		}
		seen[f.Path] = true
		action, services, ok := expressible(f.Actions)
		if !ok {
			continue
		}
		out = append(out, NoRebootPath{Path: f.Path, Action: action, Services: services})
		out = append(out, NoRebootPath{Path: f.Path + "/", Action: action, Services: services})
	}
	return out
}

func expressible(actions []operatorv1.NodeDisruptionPolicyStatusAction) (string, []string, bool) {
	action := ""
	var services []string
	for _, a := range actions {
		var t, svc string
		switch {
		case a.Type == operatorv1.NoneStatusAction:
			t = "None"
		case a.Type == operatorv1.RestartStatusAction && a.Restart != nil:
			t, svc = "Restart", string(a.Restart.ServiceName)
		case a.Type == operatorv1.ReloadStatusAction && a.Reload != nil:
			t, svc = "Reload", string(a.Reload.ServiceName)
		default:
			return "", nil, false
		}
		if action != "" && action != t {
			return "", nil, false
		}
		action = t
		if svc != "" {
			services = append(services, svc)
		}
	}
	return action, services, action != ""
}

// DefaultAllowedServices are the units a no-reboot-paths entry may name, besides those the
// cluster's policies name.
var DefaultAllowedServices = []string{"crio.service", "kubelet.service", "coreos-update-ca-trust.service"}

// AllowedServices returns the default allowlist plus every unit the policies act on.
func AllowedServices(policies refresh.Policies) []string {
	allowed := slices.Clone(DefaultAllowedServices)
	add := func(actions []operatorv1.NodeDisruptionPolicyStatusAction) {
		for _, a := range actions {
			if a.Restart != nil {
				allowed = append(allowed, string(a.Restart.ServiceName))
			}
			if a.Reload != nil {
				allowed = append(allowed, string(a.Reload.ServiceName))
			}
		}
	}
	for _, f := range policies.Files {
		add(f.Actions)
	}
	for _, u := range policies.Units {
		add(u.Actions)
	}
	add(policies.SSHKey.Actions)
	slices.Sort(allowed)
	return slices.Compact(allowed)
}

// NormalizeService turns a service as no-reboot-paths may name it into a unit name: a bare name
// gets .service, and update-ca-trust means coreos-update-ca-trust.service.
func NormalizeService(s string) string {
	if s == "update-ca-trust" || s == "update-ca-trust.service" {
		return "coreos-update-ca-trust.service"
	}
	if !strings.Contains(s, ".") {
		return s + ".service"
	}
	return s
}

// DecideWithNoRebootPaths decides a config change on the receiving node with a no-reboot-paths
// list in place of the file policies. The list can only relax file decisions: the reboot triggers
// and the changes that cannot be applied are decided as always, and an entry that is not
// absolute and clean, has an unknown action, or names a service outside allowed, is ignored, so
// its paths fall back to a reboot. Units and ssh keys follow the policies.
func DecideWithNoRebootPaths(changes []refresh.Change, policies refresh.Policies, paths []NoRebootPath, allowed []string) refresh.Result {
	valid, _ := ValidateNoRebootPaths(paths, allowed)
	return decideFiles(changes, policies, func(file string) fileRule {
		entry, ok := matchPath(valid, file)
		if !ok {
			return fileRule{missing: "no-reboot-paths has no valid entry for " + file}
		}
		r := fileRule{source: "no-reboot-paths " + entry.Path}
		if entry.Action == "None" {
			r.actions = []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.NoneStatusAction}}
		}
		for _, svc := range entry.Services {
			name := operatorv1.NodeDisruptionPolicyServiceName(svc)
			if entry.Action == "Restart" {
				r.actions = append(r.actions, operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.RestartStatusAction, Restart: &operatorv1.RestartService{ServiceName: name}})
			} else {
				r.actions = append(r.actions, operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.ReloadStatusAction, Reload: &operatorv1.ReloadService{ServiceName: name}})
			}
		}
		return r
	})
}

// ValidateNoRebootPaths checks a no-reboot-paths list as the receiving node does: it returns the
// valid entries, their services as unit names, and an error naming each entry it ignores and why.
// An ignored entry's paths fall back to a reboot, so a bad entry never suppresses one.
func ValidateNoRebootPaths(paths []NoRebootPath, allowed []string) ([]NoRebootPath, error) {
	valid := make([]NoRebootPath, 0, len(paths))
	var errs []error
	for i, p := range paths {
		v, err := validEntry(p, allowed)
		if err != nil {
			errs = append(errs, fmt.Errorf("entry %d (%q) ignored: %v", i, p.Path, err))
			continue
		}
		valid = append(valid, v)
	}
	return valid, errors.Join(errs...)
}

func validEntry(p NoRebootPath, allowed []string) (NoRebootPath, error) {
	dir := strings.HasSuffix(p.Path, "/")
	trimmed := strings.TrimSuffix(p.Path, "/")
	if !path.IsAbs(p.Path) || path.Clean(trimmed) != trimmed || trimmed == "" {
		return NoRebootPath{}, errors.New("the path must be absolute and clean, and not /")
	}
	switch p.Action {
	case "None":
		if len(p.Services) > 0 {
			return NoRebootPath{}, errors.New("action None takes no services")
		}
	case "Restart", "Reload":
		if len(p.Services) == 0 {
			return NoRebootPath{}, fmt.Errorf("action %s needs at least one service", p.Action)
		}
	default:
		return NoRebootPath{}, fmt.Errorf("unknown action %q: None, Restart or Reload", p.Action)
	}
	out := NoRebootPath{Path: trimmed, Action: p.Action}
	if dir {
		out.Path += "/"
	}
	for _, s := range p.Services {
		unit := NormalizeService(s)
		if err := unitname.Validate(unit); err != nil {
			return NoRebootPath{}, err
		}
		if !slices.Contains(allowed, unit) {
			return NoRebootPath{}, fmt.Errorf("service %s is not allowed (allowed: %s)", unit, strings.Join(allowed, ", "))
		}
		out.Services = append(out.Services, unit)
	}
	return out, nil
}

// matchPath returns the entry for p: an exact file entry, or the longest folder entry p is below.
func matchPath(entries []NoRebootPath, p string) (NoRebootPath, bool) {
	best, found := NoRebootPath{}, false
	for _, e := range entries {
		match := e.Path == p
		if strings.HasSuffix(e.Path, "/") {
			match = strings.HasPrefix(p, e.Path)
		}
		if match && (!found || len(e.Path) > len(best.Path)) {
			best, found = e, true
		}
	}
	return best, found
}
