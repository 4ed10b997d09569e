package manifests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// EmbeddedDir holds the RBAC the machine-config-controller's ServiceAccount needs beyond its own to
// run the operator in-process: one object per file, as the MCO keeps manifests/machineconfigcontroller/,
// with the MCC's namespace written {{.TargetNamespace}}, as the MCO renders it.
const EmbeddedDir = "embedded"

// Embedded files that apply only where something exists: the Cluster API Role and its binding in
// openshift-cluster-api (the ClusterAPI capability), the Machine API ones in openshift-machine-api.
const (
	EmbeddedClusterAPIRoleFile        = "bootimage-role-cluster-api.yaml"
	EmbeddedClusterAPIRoleBindingFile = "bootimage-rolebinding-cluster-api.yaml"
)

// RenderEmbedded returns each file of EmbeddedDir, by name, rendered for the MCC's namespace as the
// MCO's renderAsset would; a file naming anything but TargetNamespace fails.
func RenderEmbedded(targetNamespace string) (map[string][]byte, error) {
	dir := filepath.Join(RepoRoot(), "manifests", EmbeddedDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		tmpl, err := template.New(e.Name()).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, struct{ TargetNamespace string }{targetNamespace}); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out[e.Name()] = buf.Bytes()
	}
	return out, nil
}
