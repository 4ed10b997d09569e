// Package manifests knows which openshift/api CRDs the operator works with and where they live
// in the openshift/api Go module, so the test harness, `make manifests` and `make run` load the
// very same files.
package manifests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// openShiftAPIModule is the Go module that ships the CRDs.
const openShiftAPIModule = "github.com/openshift/api"

// Feature sets the openshift/api module generates CRD variants for.
const (
	Default              = "Default"
	TechPreviewNoUpgrade = "TechPreviewNoUpgrade"
	DevPreviewNoUpgrade  = "DevPreviewNoUpgrade"
	CustomNoUpgrade      = "CustomNoUpgrade"
)

// CRD names one CRD manifest in the openshift/api module: its folder and file name stem. Where the
// module ships one file per feature set, the file is "<Stem>-<FeatureSet>.crd.yaml", else
// "<Stem>.crd.yaml".
type CRD struct {
	Dir  string
	Stem string
}

// CRDs are the CRDs of the objects the operator reads or writes.
var CRDs = []CRD{
	{"operator/v1/zz_generated.crd-manifests", "0000_80_machine-config_01_machineconfigurations"},
	{"machine/v1beta1/zz_generated.crd-manifests", "0000_10_machine-api_01_machinesets"},
	// The machines that verify a new boot image.
	{"machine/v1beta1/zz_generated.crd-manifests", "0000_10_machine-api_01_machines"},
	{"machine/v1/zz_generated.crd-manifests", "0000_10_control-plane-machine-set_01_controlplanemachinesets"},
	{"config/v1/zz_generated.crd-manifests", "0000_10_config-operator_01_featuregates"},
	{"config/v1/zz_generated.crd-manifests", "0000_10_config-operator_01_infrastructures"},
	{"config/v1/zz_generated.crd-manifests", "0000_00_cluster-version-operator_01_clusterversions"},
	{"config/v1/zz_generated.crd-manifests", "0000_00_cluster-version-operator_01_clusteroperators"},
	// Read by `bootimagectl refresh plan --kubeconfig`.
	{"machineconfiguration/v1/zz_generated.crd-manifests", "0000_80_machine-config_01_machineconfigs"},
	{"machineconfiguration/v1/zz_generated.crd-manifests", "0000_80_machine-config_01_machineconfigpools-SelfManagedHA"},
	// The OS stream of unlabelled objects: a pool's spec.osImageStream, else the cluster's default.
	{"machineconfiguration/v1/zz_generated.crd-manifests", "0000_80_machine-config_01_osimagestreams-SelfManagedHA"},
}

// Path returns the file of crd for featureSet under the module directory moduleDir: the
// feature-set variant where the module ships several, the single file where it ships one.
func (crd CRD) Path(moduleDir, featureSet string) (string, error) {
	variant := filepath.Join(moduleDir, crd.Dir, crd.Stem+"-"+featureSet+".crd.yaml")
	if _, err := os.Stat(variant); err == nil {
		return variant, nil
	}
	single := filepath.Join(moduleDir, crd.Dir, crd.Stem+".crd.yaml")
	if _, err := os.Stat(single); err != nil {
		return "", fmt.Errorf("CRD %s: neither %s nor %s exists", crd.Stem, filepath.Base(variant), filepath.Base(single))
	}
	return single, nil
}

// CRDPaths returns the files of all CRDs for featureSet.
func CRDPaths(featureSet string) ([]string, error) {
	dir, err := OpenShiftAPIDir()
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(CRDs))
	for _, crd := range CRDs {
		p, err := crd.Path(dir, featureSet)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

var apiDir = sync.OnceValues(func() (string, error) {
	out, err := goCommand(moduleRoot(), "list", "-m", "-f", "{{.Dir}}", openShiftAPIModule)
	if err != nil {
		return "", fmt.Errorf("locating %s in the module cache: %w", openShiftAPIModule, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("%s is not in the module cache: run 'go mod download %s'", openShiftAPIModule, openShiftAPIModule)
	}
	return dir, nil
})

// OpenShiftAPIDir returns the directory of the openshift/api module version this module requires.
func OpenShiftAPIDir() (string, error) { return apiDir() }

// moduleRoot returns the directory of this repository's go.mod, found from the working directory,
// so `go list` resolves the pinned openshift/api version from any package directory.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.Contains(data, []byte("module github.com/bootimage-operator/bootimage-operator\n")) {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

// RepoRoot returns the root of this repository, found from the working directory.
func RepoRoot() string { return moduleRoot() }

// FeatureSets are the feature sets whose CRDs `make manifests` copies.
var FeatureSets = []string{Default, TechPreviewNoUpgrade}

// WriteCRDs copies the CRDs of every feature set into outDir/<FeatureSet>/ as ReadCRD serves them,
// replacing what was there.
func WriteCRDs(outDir string) error {
	for _, fs := range FeatureSets {
		want, err := CRDPaths(fs)
		if err != nil {
			return err
		}
		dir := filepath.Join(outDir, fs)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, src := range want {
			data, err := ReadCRD(fs, src)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
