package manifests

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

var machineConfigurations = CRD{"operator/v1/zz_generated.crd-manifests", "0000_80_machine-config_01_machineconfigurations"}

// moduleCRD returns the path of the MachineConfiguration CRD of featureSet in the pinned
// openshift/api, its bytes and its decoded form.
func moduleCRD(t *testing.T, featureSet string) (string, []byte, map[string]any) {
	t.Helper()
	dir, err := OpenShiftAPIDir()
	if err != nil {
		t.Fatal(err)
	}
	path, err := machineConfigurations.Path(dir, featureSet)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	return path, data, crd
}

// TestCAPIPatchStillNeeded fails once the pinned openshift/api carries PR #2990: then delete
// capi.go and let `make manifests` copy the CRDs as they are.
func TestCAPIPatchStillNeeded(t *testing.T) {
	for _, fs := range []string{Default, TechPreviewNoUpgrade} {
		_, _, crd := moduleCRD(t, fs)
		if err := patchCAPI(crd); err != nil {
			t.Errorf("%s: %v", fs, err)
		}
	}
}

func TestCAPIPatch(t *testing.T) {
	path, _, _ := moduleCRD(t, TechPreviewNoUpgrade)
	data, err := ReadCRD(TechPreviewNoUpgrade, path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, list := range []apiextensionsv1.JSONSchemaProps{
		root.Properties["spec"].Properties["managedBootImages"].Properties["machineManagers"],
		root.Properties["status"].Properties["managedBootImagesStatus"].Properties["machineManagers"],
	} {
		item := list.Items.Schema
		if got, want := enum(t, item.Properties["apiGroup"]), []string{"machine.openshift.io", "cluster.x-k8s.io"}; !slices.Equal(got, want) {
			t.Errorf("apiGroup enum %q, want %q", got, want)
		}
		if got, want := enum(t, item.Properties["resource"]), []string{"machinesets", "controlplanemachinesets", "machinedeployments"}; !slices.Equal(got, want) {
			t.Errorf("resource enum %q, want %q", got, want)
		}
		var messages []string
		for _, r := range item.XValidations {
			messages = append(messages, r.Message)
		}
		want := []string{
			"Only All or None selection mode is permitted for ControlPlaneMachineSets",
			"the machinedeployments resource is only supported in the cluster.x-k8s.io API group",
			"the controlplanemachinesets resource is only supported in the machine.openshift.io API group",
		}
		if !slices.Equal(messages, want) {
			t.Errorf("item rules %q, want %q", messages, want)
		}
	}

	// The Default feature set does not enable the gate: its CRD is served as shipped.
	defaultPath, raw, _ := moduleCRD(t, Default)
	served, err := ReadCRD(Default, defaultPath)
	if err != nil || !bytes.Equal(served, raw) {
		t.Errorf("the Default CRD was changed (err %v)", err)
	}
}

func enum(t *testing.T, p apiextensionsv1.JSONSchemaProps) []string {
	t.Helper()
	out := make([]string, len(p.Enum))
	for i, v := range p.Enum {
		if err := yaml.Unmarshal(v.Raw, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The patched file differs from openshift/api's only where the patch changed it: decoding and
// encoding an unpatched CRD gives its bytes back.
func TestReencodingKeepsTheGeneratorsLayout(t *testing.T) {
	_, data, crd := moduleCRD(t, TechPreviewNoUpgrade)
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, data) {
		t.Error("re-encoding the MachineConfiguration CRD changes it")
	}
}

// A CRD whose shape moved is refused, naming the node, rather than patched somewhere else.
func TestCAPIPatchFailsWhenTheShapeMoves(t *testing.T) {
	schema := func(crd map[string]any) map[string]any {
		v, _, err := lookup(crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any), "schema", "openAPIV3Schema", "properties")
		if err != nil {
			t.Fatal(err)
		}
		return v.(map[string]any)
	}
	for _, tc := range []struct {
		name   string
		mutate func(crd map[string]any)
		want   string
	}{
		{"status list gone", func(crd map[string]any) {
			v, _, _ := lookup(schema(crd), "status", "properties", "managedBootImagesStatus", "properties")
			delete(v.(map[string]any), "machineManagers")
		}, "CRD has no schema.openAPIV3Schema.properties.status.properties.managedBootImagesStatus.properties.machineManagers"},
		{"enum without the value to insert after", func(crd map[string]any) {
			v, _, _ := lookup(schema(crd), "spec", "properties", "managedBootImages", "properties", "machineManagers", "items", "properties", "resource")
			v.(map[string]any)["enum"] = []any{"machinesets"}
		}, `properties.resource.enum [machinesets] lacks "controlplanemachinesets"`},
		{"a second version", func(crd map[string]any) {
			spec := crd["spec"].(map[string]any)
			spec["versions"] = append(spec["versions"].([]any), map[string]any{})
		}, "want one version"},
		{"already patched", func(crd map[string]any) {
			if err := patchCAPI(crd); err != nil {
				t.Fatal(err)
			}
		}, "the pinned openshift/api has PR #2990"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, crd := moduleCRD(t, TechPreviewNoUpgrade)
			tc.mutate(crd)
			err := patchCAPI(crd)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
