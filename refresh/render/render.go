// Package render computes the config a MachineConfigPool's nodes get from its MachineConfigs, the
// way the MCO's render controller merges them, so a change can be previewed before it is applied.
// It is pure: MachineConfigs in, rendered config out.
package render

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	ign35 "github.com/coreos/ignition/v2/config/v3_5"
	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Labels and annotations the MCO sets on MachineConfigs.
const (
	// RoleLabel names the pool role a MachineConfig is for.
	RoleLabel = "machineconfiguration.openshift.io/role"
	// GeneratedByAnnotation marks MachineConfigs the MCO's controllers generated; they cannot
	// override the OS image.
	GeneratedByAnnotation = "machineconfiguration.openshift.io/generated-by-controller-version"
	// OSImageOverriddenAnnotation marks a rendered config whose OS image a MachineConfig overrode.
	OSImageOverriddenAnnotation = "machineconfiguration.openshift.io/os-image-url-overridden"
)

// Kernel types.
const (
	KernelTypeDefault  = "default"
	KernelTypeRealtime = "realtime"
	KernelType64kPages = "64k-pages"
)

// workerRole is the base pool role: custom pools inherit its configs and override them.
const workerRole = "worker"

// SupportedExtensions are the RHCOS extensions a MachineConfig may ask for.
var SupportedExtensions = []string{"ipsec", "kerberos", "kernel-devel", "sandboxed-containers", "sysstat", "two-node-ha", "usbguard"}

// Render merges configs into the rendered MachineConfig the pool's nodes get (unnamed; read it
// with refresh.FromMachineConfig), its Ignition config in spec 3.5.0. baseOSImage is the release's OS
// image (ControllerConfig spec.baseOSContainerImage), which a MachineConfig that the MCO did not
// generate may override. The order is the MCO's: configs for the worker role sorted by name, then
// the others (a custom pool's own) sorted by name, so a custom pool's config wins; Ignition is
// merged with Ignition's own merge, later configs winning; kernel arguments and extensions are
// appended in that order; FIPS is on when any config turns it on; a realtime or 64k-pages kernel
// type wins over default.
func Render(configs []*mcfgv1.MachineConfig, baseOSImage string) (*mcfgv1.MachineConfig, error) {
	if len(configs) == 0 {
		return nil, fmt.Errorf("no MachineConfigs to render")
	}
	for _, mc := range configs {
		if err := Validate(mc); err != nil {
			return nil, err
		}
	}
	ordered := order(configs)
	out := &mcfgv1.MachineConfig{Spec: mcfgv1.MachineConfigSpec{
		OSImageURL:      baseOSImage,
		KernelType:      KernelTypeDefault,
		KernelArguments: []string{},
		Extensions:      []string{},
	}}
	merged := ign.Config{Ignition: ign.Ignition{Version: ign.MaxVersion.String()}}
	for _, mc := range ordered {
		if cfg, ok, err := ignition(mc); err != nil {
			return nil, err
		} else if ok {
			merged = merge(merged, cfg)
		}
		out.Spec.FIPS = out.Spec.FIPS || mc.Spec.FIPS
		if mc.Spec.KernelType == KernelTypeRealtime || mc.Spec.KernelType == KernelType64kPages {
			out.Spec.KernelType = mc.Spec.KernelType
		}
		out.Spec.KernelArguments = append(out.Spec.KernelArguments, mc.Spec.KernelArguments...)
		out.Spec.Extensions = append(out.Spec.Extensions, mc.Spec.Extensions...)
		if mc.Spec.OSImageURL != "" && mc.Annotations[GeneratedByAnnotation] == "" {
			out.Spec.OSImageURL = mc.Spec.OSImageURL
		}
	}
	// The MCO always overwrites files, Ignition does not by default: the MCO writes that down so
	// new nodes behave as updated ones.
	for i := range merged.Storage.Files {
		if merged.Storage.Files[i].Overwrite == nil {
			yes := true
			merged.Storage.Files[i].Overwrite = &yes
		}
	}
	if out.Spec.KernelType != KernelTypeDefault && slices.Contains(out.Spec.Extensions, "kernel-devel") {
		return nil, fmt.Errorf("extension kernel-devel needs the default kernel, not kernelType %s", out.Spec.KernelType)
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("rendered Ignition config: %v", err)
	}
	out.Spec.Config = runtime.RawExtension{Raw: raw}
	return out, nil
}

func order(configs []*mcfgv1.MachineConfig) []*mcfgv1.MachineConfig {
	var worker, other []*mcfgv1.MachineConfig
	for _, mc := range configs {
		if mc.Labels[RoleLabel] == workerRole {
			worker = append(worker, mc)
		} else {
			other = append(other, mc)
		}
	}
	byName := func(s []*mcfgv1.MachineConfig) {
		sort.SliceStable(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	}
	byName(worker)
	byName(other)
	return append(worker, other...)
}

// merge merges child into parent. Ignition merges a file's compression and contents as separate
// fields, so a plain file replacing a gzipped one would keep "gzip": an explicit empty compression
// makes the child's absence of one win (coreos/butane#332, as the MCO does).
func merge(parent, child ign.Config) ign.Config {
	empty := ""
	for i := range child.Storage.Files {
		if child.Storage.Files[i].Contents.Compression == nil {
			child.Storage.Files[i].Contents.Compression = &empty
		}
	}
	out := ign35.Merge(parent, child)
	for i := range out.Storage.Files {
		if c := out.Storage.Files[i].Contents.Compression; c != nil && *c == "" {
			out.Storage.Files[i].Contents.Compression = nil
		}
	}
	return out
}

// ignition parses mc's Ignition config, of any spec from 3.0.0 to 3.5.0 (the MCO's), into 3.5.0;
// ok is false when mc has none.
func ignition(mc *mcfgv1.MachineConfig) (cfg ign.Config, ok bool, err error) {
	raw := mc.Spec.Config.Raw
	if len(raw) == 0 || string(raw) == "null" {
		return ign.Config{}, false, nil
	}
	cfg, rpt, err := ign35.ParseCompatibleVersion(raw)
	if err != nil {
		return ign.Config{}, false, fmt.Errorf("MachineConfig %s spec.config: invalid Ignition config: %v %s", mc.Name, err, strings.TrimSpace(rpt.String()))
	}
	return cfg, true, nil
}

// Validate checks mc as the MCO does before it renders: a known kernel type, supported extensions
// and a valid Ignition 3.x config. The error names the MachineConfig and the field.
func Validate(mc *mcfgv1.MachineConfig) error {
	switch mc.Spec.KernelType {
	case "", KernelTypeDefault, KernelTypeRealtime, KernelType64kPages:
	default:
		return fmt.Errorf("MachineConfig %s spec.kernelType: %q is not one of %s, %s, %s", mc.Name, mc.Spec.KernelType, KernelTypeDefault, KernelTypeRealtime, KernelType64kPages)
	}
	var unknown []string
	for _, e := range mc.Spec.Extensions {
		if !slices.Contains(SupportedExtensions, e) {
			unknown = append(unknown, e)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("MachineConfig %s spec.extensions: %s not supported (supported: %s)", mc.Name, strings.Join(unknown, ", "), strings.Join(SupportedExtensions, ", "))
	}
	_, _, err := ignition(mc)
	return err
}

// Selects reports whether pool renders mc: its spec.machineConfigSelector matches mc's labels. A
// nil or empty selector selects nothing, as in the MCO, where such a pool is refused.
func Selects(pool *mcfgv1.MachineConfigPool, mc *mcfgv1.MachineConfig) (bool, error) {
	selector, err := metav1.LabelSelectorAsSelector(pool.Spec.MachineConfigSelector)
	if err != nil {
		return false, fmt.Errorf("MachineConfigPool %s spec.machineConfigSelector: %v", pool.Name, err)
	}
	return !selector.Empty() && selector.Matches(labels.Set(mc.Labels)), nil
}
