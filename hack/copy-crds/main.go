// Command copy-crds copies the CRDs the operator uses from the pinned openshift/api module into
// manifests/crds/<FeatureSet>/, and writes the manifests' platform lists from the platform
// registry (`make manifests`).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/bootimage-operator/bootimage-operator/manifests"
)

func main() {
	out := filepath.Join(manifests.RepoRoot(), "manifests", "crds")
	if err := manifests.WriteCRDs(out); err != nil {
		fmt.Fprintf(os.Stderr, "copy-crds: %v\n", err)
		os.Exit(1)
	}
	if err := writeRegistry(manifests.RepoRoot()); err != nil {
		fmt.Fprintf(os.Stderr, "copy-crds: %v\n", err)
		os.Exit(1)
	}
}
