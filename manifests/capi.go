package manifests

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The Cluster API additions of openshift/api PR #2990 (gate ManagedBootImagesAWSCAPI,
// TechPreviewNoUpgrade and DevPreviewNoUpgrade): no openshift/api version the module proxy serves
// has them yet, so `make manifests` and the test harness apply them to the MachineConfiguration
// CRD of the feature sets that enable the gate. The patch edits the decoded schema and fails, naming
// the node, when the CRD's shape moves; it refuses to apply once openshift/api already has the
// values (TestCAPIPatchStillNeeded fails), and then goes.
const (
	// CAPIGroup and MachineDeploymentsResource are the enum values #2990 adds.
	CAPIGroup                  = "cluster.x-k8s.io"
	MachineDeploymentsResource = "machinedeployments"

	machineConfigurationsCRD = "machineconfigurations.operator.openshift.io"
)

// capiFeatureSets are the feature sets whose MachineConfiguration CRD gets the patch.
var capiFeatureSets = []string{TechPreviewNoUpgrade, DevPreviewNoUpgrade, CustomNoUpgrade}

// capiRules are #2990's item rules, word for word, after the CPMS All/None rule.
var capiRules = []apiextensionsv1.ValidationRule{
	{
		Rule:    "self.resource == 'machinedeployments' ? self.apiGroup == 'cluster.x-k8s.io' : true",
		Message: "the machinedeployments resource is only supported in the cluster.x-k8s.io API group",
	},
	{
		Rule:    "self.resource == 'controlplanemachinesets' ? self.apiGroup == 'machine.openshift.io' : true",
		Message: "the controlplanemachinesets resource is only supported in the machine.openshift.io API group",
	},
}

// #2990's field descriptions, so that `kubectl explain` says what the enums allow.
const (
	capiAPIGroupDescription = `apiGroup is name of the APIGroup that the machine management resource belongs to.
Valid values are machine.openshift.io and cluster.x-k8s.io.
machine.openshift.io means that the machine manager will only register resources that belong to OpenShift machine API group.
cluster.x-k8s.io means that the machine manager will only register resources that belong to the Cluster API group.`
	capiResourceDescription = `resource is the machine management resource's type.
Valid values are machinesets, controlplanemachinesets and machinedeployments.
machinesets means that the machine manager will only register resources of the kind MachineSet.
controlplanemachinesets means that the machine manager will only register resources of the kind ControlPlaneMachineSet.
machinedeployments means that the machine manager will only register resources of the kind MachineDeployment.`
)

// ReadCRD returns the CRD file at path as served for featureSet: the file itself, or, for the
// MachineConfiguration CRD of a feature set that enables ManagedBootImagesAWSCAPI, the file with
// PR #2990 applied.
func ReadCRD(featureSet, path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil || !slices.Contains(capiFeatureSets, featureSet) {
		return data, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("parsing CRD %s: %w", path, err)
	}
	if crd.Name != machineConfigurationsCRD {
		return data, nil
	}
	if err := PatchCAPI(crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return encodeCRD(crd)
}

// PatchCAPI adds #2990's enum values and rules to the machineManagers items of spec and status.
func PatchCAPI(crd *apiextensionsv1.CustomResourceDefinition) error {
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil || crd.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
		return fmt.Errorf("CRD %s: want one version with a schema, the shape #2990 was written for", crd.Name)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, path := range [][]string{
		{"spec", "managedBootImages", "machineManagers"},
		{"status", "managedBootImagesStatus", "machineManagers"},
	} {
		if err := editProperty(root, "", path, patchMachineManagers); err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}

func patchMachineManagers(list *apiextensionsv1.JSONSchemaProps, path string) error {
	if list.Items == nil || list.Items.Schema == nil {
		return fmt.Errorf("%s has no items schema", path)
	}
	item := list.Items.Schema
	for _, field := range []struct {
		name, add, after, description string
	}{
		{"apiGroup", CAPIGroup, "machine.openshift.io", capiAPIGroupDescription},
		{"resource", MachineDeploymentsResource, "controlplanemachinesets", capiResourceDescription},
	} {
		prop, ok := item.Properties[field.name]
		if !ok {
			return fmt.Errorf("%s.items has no property %s", path, field.name)
		}
		values, err := enumStrings(prop.Enum)
		if err != nil {
			return fmt.Errorf("%s.items.%s: %w", path, field.name, err)
		}
		if slices.Contains(values, field.add) {
			return fmt.Errorf("%s.items.%s already allows %q: the pinned openshift/api has PR #2990, remove manifests/capi.go", path, field.name, field.add)
		}
		at := slices.Index(values, field.after)
		if at < 0 {
			return fmt.Errorf("%s.items.%s enum %v lacks %q", path, field.name, values, field.after)
		}
		values = slices.Insert(values, at+1, field.add)
		if prop.Enum, err = enumJSON(values); err != nil {
			return err
		}
		prop.Description = field.description
		item.Properties[field.name] = prop
	}
	for _, rule := range capiRules {
		if slices.ContainsFunc(item.XValidations, func(r apiextensionsv1.ValidationRule) bool { return r.Rule == rule.Rule }) {
			return fmt.Errorf("%s.items already has the rule %q: the pinned openshift/api has PR #2990, remove manifests/capi.go", path, rule.Rule)
		}
	}
	item.XValidations = append(item.XValidations, capiRules...)
	return nil
}

// editProperty applies edit to the property at path under root (at is the path so far, for
// messages) and writes the copy back: schema properties are held by value.
func editProperty(root *apiextensionsv1.JSONSchemaProps, at string, path []string, edit func(*apiextensionsv1.JSONSchemaProps, string) error) error {
	if at != "" {
		at += "."
	}
	at += path[0]
	prop, ok := root.Properties[path[0]]
	if !ok {
		return fmt.Errorf("schema has no property %s", at)
	}
	var err error
	if len(path) == 1 {
		err = edit(&prop, at)
	} else {
		err = editProperty(&prop, at, path[1:], edit)
	}
	if err != nil {
		return err
	}
	root.Properties[path[0]] = prop
	return nil
}

func enumStrings(enum []apiextensionsv1.JSON) ([]string, error) {
	out := make([]string, len(enum))
	for i, v := range enum {
		if err := json.Unmarshal(v.Raw, &out[i]); err != nil {
			return nil, fmt.Errorf("enum value %s is not a string", v.Raw)
		}
	}
	return out, nil
}

func enumJSON(values []string) ([]apiextensionsv1.JSON, error) {
	out := make([]apiextensionsv1.JSON, len(values))
	for i, v := range values {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[i] = apiextensionsv1.JSON{Raw: raw}
	}
	return out, nil
}

// encodeCRD writes crd as openshift/api's generator does (sorted keys, no status), so the patched
// file differs from the original only where the patch changed it.
func encodeCRD(crd *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	raw, err := json.Marshal(crd)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	delete(doc, "status")
	return yaml.Marshal(doc)
}
