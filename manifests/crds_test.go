package manifests_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// TestCRDsUpToDate fails when manifests/crds differs from the pinned openshift/api module.
func TestCRDsUpToDate(t *testing.T) {
	for _, fs := range manifests.FeatureSets {
		paths, err := manifests.CRDPaths(fs)
		if err != nil {
			t.Fatal(err)
		}
		shipped, _ := filepath.Glob(filepath.Join("crds", fs, "*.yaml"))
		if len(shipped) != len(paths) {
			t.Errorf("manifests/crds/%s has %d CRDs, want %d: run 'make manifests'", fs, len(shipped), len(paths))
		}
		for _, src := range paths {
			want, err := manifests.ReadCRD(fs, src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join("crds", fs, filepath.Base(src)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("manifests/crds/%s/%s is stale or missing: run 'make manifests'", fs, filepath.Base(src))
			}
		}
	}
}
