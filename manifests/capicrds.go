package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// capiToolsModule pins the Cluster API modules whose CRDs the test harness serves.
const capiToolsModule = "hack/tools/capi-crds"

type crdFiles struct {
	module string
	files  []string
}

// CAPIProvider is a Cluster API infrastructure provider whose CRDs the test harness serves: its Go
// module and its infrastructure machine template kind (a registered platform's traits).
type CAPIProvider struct{ Module, TemplateKind string }

// capiCRDFiles are the CRDs of the objects the operator reads or writes on the Cluster API side,
// per module, as named in its config/crd/bases: cluster-api's own, and each provider's
// infrastructure machine template and machine.
func capiCRDFiles(providers []CAPIProvider) []crdFiles {
	out := []crdFiles{{"sigs.k8s.io/cluster-api", []string{
		"cluster.x-k8s.io_clusters.yaml",
		"cluster.x-k8s.io_machinesets.yaml",
		"cluster.x-k8s.io_machinedeployments.yaml",
		"cluster.x-k8s.io_machines.yaml",
	}}}
	for _, p := range providers {
		plural := func(kind string) string {
			return "infrastructure.cluster.x-k8s.io_" + strings.ToLower(kind) + "s.yaml"
		}
		out = append(out, crdFiles{p.Module, []string{plural(p.TemplateKind), plural(strings.TrimSuffix(p.TemplateKind, "Template"))}})
	}
	return out
}

// CAPICRDPaths returns the files of the Cluster API CRDs (cluster-api core and providers') at the
// versions hack/tools/capi-crds pins, downloading the modules from the Go module proxy into the
// module cache when missing.
func CAPICRDPaths(providers []CAPIProvider) ([]string, error) {
	dirs, err := capiModuleDirs()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, m := range capiCRDFiles(providers) {
		dir, ok := dirs[m.module]
		if !ok {
			return nil, fmt.Errorf("%s/go.mod does not require %s", capiToolsModule, m.module)
		}
		for _, f := range m.files {
			paths = append(paths, filepath.Join(dir, "config", "crd", "bases", f))
		}
	}
	return paths, nil
}

var capiModuleDirs = sync.OnceValues(func() (map[string]string, error) {
	dir := filepath.Join(RepoRoot(), capiToolsModule)
	edit, err := goCommand(dir, "mod", "edit", "-json")
	if err != nil {
		return nil, err
	}
	var mod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(edit, &mod); err != nil {
		return nil, fmt.Errorf("reading %s/go.mod: %w", capiToolsModule, err)
	}
	args := []string{"mod", "download", "-json"}
	for _, r := range mod.Require {
		args = append(args, r.Path+"@"+r.Version)
	}
	// On failure the go command still reports each module, with its Error, on stdout.
	out, runErr := goCommand(dir, args...)
	dirs := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m struct{ Path, Dir, Error string }
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return dirs, runErr
		} else if err != nil {
			return nil, errors.Join(runErr, err)
		}
		if m.Error != "" {
			return nil, fmt.Errorf("downloading %s: %s", m.Path, m.Error)
		}
		dirs[m.Path] = m.Dir
	}
})

// goCommand runs the go command in dir and returns its stdout, also when it fails.
func goCommand(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("go %s in %s: %v: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
