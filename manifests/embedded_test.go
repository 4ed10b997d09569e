package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// The annotations that say where the CVO applies an object, and where the MCO should.
const (
	capabilityAnnotation  = "capability.openshift.io/name"
	featureGateAnnotation = "release.openshift.io/feature-gate"
)

// TestEmbeddedRBACInTheMCOsForm checks manifests/embedded/ as the MCO keeps
// manifests/machineconfigcontroller/: one object a file, the MCC's namespace templated, and a
// namespaced object annotated as the operator's own Role of that namespace is (capability and
// feature gates), so the Cluster API Role is marked for where Cluster API exists.
func TestEmbeddedRBACInTheMCOsForm(t *testing.T) {
	const target = "rendered-target-namespace"
	files, err := RenderEmbedded(target)
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]metav1.ObjectMeta{}
	for _, doc := range documentsOf(t, RBACFile) {
		var role rbacv1.Role
		if err := yaml.Unmarshal(doc, &role); err == nil && role.Kind == "Role" && role.Name == "bootimage-operator" {
			own[role.Namespace] = role.ObjectMeta
		}
	}
	namespaces := map[string]bool{}
	for name, data := range files {
		raw, err := os.ReadFile(filepath.Join(EmbeddedDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "AddToManager") || strings.Contains(string(raw), "openshift-machine-config-operator") {
			t.Errorf("%s names AddToManager or the MCC's namespace (write {{.TargetNamespace}})", name)
		}
		docs := 0
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(bytes.TrimSpace(doc)) > 0 {
				docs++
			}
		}
		var obj struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
			Subjects          []rbacv1.Subject `json:"subjects"`
		}
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if docs != 1 {
			t.Errorf("%s holds %d objects: the MCO keeps one a file", name, docs)
		}
		for _, s := range obj.Subjects {
			if s.Kind != rbacv1.ServiceAccountKind || s.Name != "machine-config-controller" || s.Namespace != target {
				t.Errorf("%s binds %s %s/%s: want the ServiceAccount machine-config-controller in {{.TargetNamespace}}", name, s.Kind, s.Namespace, s.Name)
			}
		}
		if obj.Namespace == "" {
			continue
		}
		namespaces[obj.Namespace] = true
		ownRole, ok := own[obj.Namespace]
		if !ok {
			t.Errorf("%s: %s %s is in %s, where the operator's own RBAC has no Role", name, obj.Kind, obj.Name, obj.Namespace)
			continue
		}
		for _, a := range []string{capabilityAnnotation, featureGateAnnotation} {
			if got, want := obj.Annotations[a], ownRole.Annotations[a]; got != want {
				t.Errorf("%s: %s %s has %s %q, the operator's own Role in %s %q", name, obj.Kind, obj.Name, a, got, obj.Namespace, want)
			}
		}
	}
	if !namespaces[bootimage.ClusterAPINamespace] || own[bootimage.ClusterAPINamespace].Annotations[featureGateAnnotation] == "" {
		t.Errorf("no gated embedded object in %s", bootimage.ClusterAPINamespace)
	}
	for _, f := range []string{EmbeddedClusterAPIRoleFile, EmbeddedClusterAPIRoleBindingFile} {
		if _, ok := files[f]; !ok {
			t.Errorf("manifests/%s/%s is missing", EmbeddedDir, f)
		}
	}
}
