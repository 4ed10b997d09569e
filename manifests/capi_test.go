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

// moduleCRD reads the MachineConfiguration CRD of featureSet as the pinned openshift/api ships it.
func moduleCRD(t *testing.T, featureSet string) ([]byte, *apiextensionsv1.CustomResourceDefinition) {
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
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	return data, crd
}

// TestCAPIPatchStillNeeded fails once the pinned openshift/api carries PR #2990: then delete
// capi.go and let `make manifests` copy the CRDs as they are.
func TestCAPIPatchStillNeeded(t *testing.T) {
	for _, fs := range []string{Default, TechPreviewNoUpgrade} {
		_, crd := moduleCRD(t, fs)
		if err := PatchCAPI(crd); err != nil {
			t.Errorf("%s: %v", fs, err)
		}
	}
}

func TestCAPIPatch(t *testing.T) {
	dir, err := OpenShiftAPIDir()
	if err != nil {
		t.Fatal(err)
	}
	path, err := machineConfigurations.Path(dir, TechPreviewNoUpgrade)
	if err != nil {
		t.Fatal(err)
	}
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
		groups, _ := enumStrings(item.Properties["apiGroup"].Enum)
		resources, _ := enumStrings(item.Properties["resource"].Enum)
		if !slices.Equal(groups, []string{"machine.openshift.io", "cluster.x-k8s.io"}) {
			t.Errorf("apiGroup enum %v", groups)
		}
		if !slices.Equal(resources, []string{"machinesets", "controlplanemachinesets", "machinedeployments"}) {
			t.Errorf("resource enum %v", resources)
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
	defaultPath, err := machineConfigurations.Path(dir, Default)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(defaultPath)
	served, err := ReadCRD(Default, defaultPath)
	if err != nil || !bytes.Equal(served, raw) {
		t.Errorf("the Default CRD was changed (err %v)", err)
	}
}

// The patched file differs from openshift/api's only where the patch changed it: re-encoding an
// unpatched CRD gives its bytes back.
func TestEncodeCRDKeepsTheGeneratorsLayout(t *testing.T) {
	data, crd := moduleCRD(t, TechPreviewNoUpgrade)
	out, err := encodeCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, data) {
		t.Error("re-encoding the MachineConfiguration CRD changes it")
	}
}

// A CRD whose shape moved is refused, naming the node, rather than patched somewhere else.
func TestCAPIPatchFailsWhenTheShapeMoves(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(root *apiextensionsv1.JSONSchemaProps)
		want   string
	}{
		{"status list gone", func(root *apiextensionsv1.JSONSchemaProps) {
			delete(root.Properties["status"].Properties["managedBootImagesStatus"].Properties, "machineManagers")
		}, "schema has no property status.managedBootImagesStatus.machineManagers"},
		{"enum without the value to insert after", func(root *apiextensionsv1.JSONSchemaProps) {
			item := root.Properties["spec"].Properties["managedBootImages"].Properties["machineManagers"].Items.Schema
			p := item.Properties["resource"]
			p.Enum = p.Enum[:1]
			item.Properties["resource"] = p
		}, `spec.managedBootImages.machineManagers.items.resource enum [machinesets] lacks "controlplanemachinesets"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, crd := moduleCRD(t, TechPreviewNoUpgrade)
			tc.mutate(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
			err := PatchCAPI(crd)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("already patched", func(t *testing.T) {
		_, crd := moduleCRD(t, TechPreviewNoUpgrade)
		if err := PatchCAPI(crd); err != nil {
			t.Fatal(err)
		}
		err := PatchCAPI(crd)
		if err == nil || !strings.Contains(err.Error(), "the pinned openshift/api has PR #2990") {
			t.Errorf("got %v", err)
		}
	})
}
