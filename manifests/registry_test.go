package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
)

// allGates turns every gate on: what the platform lists are checked against is the widest the
// code manages.
type allGates struct{}

func (allGates) Enabled(configv1.FeatureGateName) bool { return true }

// documentsOf returns the YAML documents of the manifest at path.
func documentsOf(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
}

// supported is the platforms of the code's registry for which managed returns true, as the
// admission policy spells them.
func supported(managed func(configv1.PlatformType, bootimage.Gates) bool) []string {
	var out []string
	for _, p := range bootimage.Platforms() {
		if t := p.Traits().Type; managed(t, allGates{}) {
			out = append(out, string(t))
		}
	}
	slices.Sort(out)
	return out
}

// TestAdmissionPlatformsAreTheRegistry fails when a platform the code manages is missing from the
// admission policy's lists, or the policy lets through one the code does not manage.
func TestAdmissionPlatformsAreTheRegistry(t *testing.T) {
	var policy *admissionregistrationv1.ValidatingAdmissionPolicy
	for _, doc := range documentsOf(t, AdmissionFile) {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := yaml.Unmarshal(doc, &p); err == nil && p.Kind == "ValidatingAdmissionPolicy" && p.Name == "bootimage-managed-boot-images-platform" {
			policy = &p
		}
	}
	if policy == nil {
		t.Fatalf("%s: no ValidatingAdmissionPolicy bootimage-managed-boot-images-platform", AdmissionFile)
	}
	list := regexp.MustCompile(`variables\.platform in \[([^\]]*)\]`)
	for optIns, managed := range map[string]func(configv1.PlatformType, bootimage.Gates) bool{
		"newMachineSetOptIns": bootimage.MachineSetsSupported,
		"newCPMSOptIns":       bootimage.CPMSSupported,
		"newCAPIOptIns":       bootimage.ClusterAPISupported,
	} {
		var found []string
		for _, v := range policy.Spec.Validations {
			if !strings.Contains(v.Expression, "variables."+optIns+".size() == 0") {
				continue
			}
			m := list.FindStringSubmatch(v.Expression)
			if m == nil {
				t.Fatalf("the validation of %s names no platform list: %s", optIns, v.Expression)
			}
			for _, p := range strings.Split(m[1], ",") {
				found = append(found, strings.Trim(strings.TrimSpace(p), "'"))
			}
		}
		slices.Sort(found)
		if want := supported(managed); !slices.Equal(found, want) {
			t.Errorf("%s: the admission policy lets %s opt in on %v, the code manages %v (make manifests writes them)", AdmissionFile, optIns, found, want)
		}
	}
}

// TestClusterAPIRoleIsTheRegistry fails when a template kind the code updates lacks its rules in
// a Cluster API Role (shipped or embedded), or its provider's module in the test harness's pins,
// or when a Role grants an infrastructure kind no platform has.
func TestClusterAPIRoleIsTheRegistry(t *testing.T) {
	var want []string
	for _, kind := range bootimage.TemplateKinds() {
		want = append(want, strings.ToLower(kind)+"s", strings.ToLower(strings.TrimSuffix(kind, "Template"))+"s")
	}
	slices.Sort(want)
	for _, file := range []string{RBACFile, filepath.Join(EmbeddedDir, EmbeddedClusterAPIRoleFile)} {
		roles := 0
		for _, doc := range documentsOf(t, file) {
			var role rbacv1.Role
			if err := yaml.Unmarshal(doc, &role); err != nil || role.Kind != "Role" || role.Namespace != bootimage.ClusterAPINamespace {
				continue
			}
			roles++
			var granted []string
			for _, rule := range role.Rules {
				if slices.Contains(rule.APIGroups, clusterapi.InfrastructureGroup) {
					granted = append(granted, rule.Resources...)
				}
			}
			slices.Sort(granted)
			if !slices.Equal(slices.Compact(granted), want) {
				t.Errorf("%s: Role %s grants %v in %s, the registry's template kinds need %v (make manifests writes them)", file, role.Name, granted, clusterapi.InfrastructureGroup, want)
			}
		}
		if roles != 1 {
			t.Errorf("%s: %d Roles in %s, want 1", file, roles, bootimage.ClusterAPINamespace)
		}
	}
	// The harness serves each registered provider's CRDs (capiCRDFiles): its module must be pinned.
	gomod, err := os.ReadFile(filepath.Join(RepoRoot(), capiToolsModule, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range capiCRDFiles(registryProviders()) {
		if !regexp.MustCompile(`(?m)^\s*(require\s+)?` + regexp.QuoteMeta(m.module) + `\s+v`).Match(gomod) {
			t.Errorf("%s/go.mod does not pin %s, whose CRDs %v the test harness serves", capiToolsModule, m.module, m.files)
		}
	}
}

// registryProviders are the Cluster API providers of the registered platforms, as the test
// harness serves them (testenv).
func registryProviders() []CAPIProvider {
	var out []CAPIProvider
	for _, p := range bootimage.Platforms() {
		if t := p.Traits(); t.TemplateKind != "" {
			out = append(out, CAPIProvider{Module: t.ClusterAPIProvider, TemplateKind: t.TemplateKind})
		}
	}
	return out
}
