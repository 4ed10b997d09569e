package manifests

import (
	"fmt"
	"os"
	"slices"

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

type capiRule struct{ rule, message string }

// capiRules are #2990's item rules, word for word, after the CPMS All/None rule.
var capiRules = []capiRule{
	{
		rule:    "self.resource == 'machinedeployments' ? self.apiGroup == 'cluster.x-k8s.io' : true",
		message: "the machinedeployments resource is only supported in the cluster.x-k8s.io API group",
	},
	{
		rule:    "self.resource == 'controlplanemachinesets' ? self.apiGroup == 'machine.openshift.io' : true",
		message: "the controlplanemachinesets resource is only supported in the machine.openshift.io API group",
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
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, fmt.Errorf("parsing CRD %s: %w", path, err)
	}
	if name, _, _ := lookup(crd, "metadata", "name"); name != machineConfigurationsCRD {
		return data, nil
	}
	if err := patchCAPI(crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Keys sorted, as openshift/api's generator writes them: the file differs from the original
	// only where the patch changed it.
	return yaml.Marshal(crd)
}

// patchCAPI adds #2990's enum values, descriptions and rules to the machineManagers items of spec
// and status of crd, decoded from YAML.
func patchCAPI(crd map[string]any) error {
	versions, _, err := lookup(crd, "spec", "versions")
	if list, ok := versions.([]any); err != nil || !ok || len(list) != 1 {
		return fmt.Errorf("CRD %s: want one version, the shape #2990 was written for", machineConfigurationsCRD)
	}
	for _, list := range [][]string{{"spec", "managedBootImages"}, {"status", "managedBootImagesStatus"}} {
		item, at, err := lookup(versions.([]any)[0].(map[string]any),
			"schema", "openAPIV3Schema", "properties", list[0], "properties", list[1], "properties", "machineManagers", "items")
		if err != nil {
			return err
		}
		itemNode, ok := item.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is not a schema", at)
		}
		if err := patchMachineManager(itemNode, at); err != nil {
			return err
		}
	}
	return nil
}

func patchMachineManager(item map[string]any, at string) error {
	for _, field := range []struct {
		name, add, after, description string
	}{
		{"apiGroup", CAPIGroup, "machine.openshift.io", capiAPIGroupDescription},
		{"resource", MachineDeploymentsResource, "controlplanemachinesets", capiResourceDescription},
	} {
		prop, propAt, err := lookup(item, "properties", field.name)
		propNode, ok := prop.(map[string]any)
		if err != nil || !ok {
			return fmt.Errorf("%s.properties has no property %s", at, field.name)
		}
		enum, _ := propNode["enum"].([]any)
		if slices.Contains(enum, any(field.add)) {
			return fmt.Errorf("%s.enum already allows %q: the pinned openshift/api has PR #2990, remove manifests/capi.go", propAt, field.add)
		}
		i := slices.Index(enum, any(field.after))
		if i < 0 {
			return fmt.Errorf("%s.enum %v lacks %q", propAt, enum, field.after)
		}
		propNode["enum"] = slices.Insert(enum, i+1, any(field.add))
		propNode["description"] = field.description
	}
	rules, _ := item["x-kubernetes-validations"].([]any)
	for _, r := range rules {
		if rule, _ := r.(map[string]any); slices.ContainsFunc(capiRules, func(c capiRule) bool { return c.rule == rule["rule"] }) {
			return fmt.Errorf("%s already has the rule %q: the pinned openshift/api has PR #2990, remove manifests/capi.go", at, rule["rule"])
		}
	}
	for _, c := range capiRules {
		rules = append(rules, map[string]any{"rule": c.rule, "message": c.message})
	}
	item["x-kubernetes-validations"] = rules
	return nil
}

// lookup returns the value at keys under n, and the path to it for messages, or an error naming
// the first key that is missing.
func lookup(n map[string]any, keys ...string) (any, string, error) {
	var v any = n
	at := ""
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if at != "" {
			at += "."
		}
		at += k
		if !ok {
			return nil, at, fmt.Errorf("CRD has no %s", at)
		}
		if v, ok = m[k]; !ok {
			return nil, at, fmt.Errorf("CRD has no %s", at)
		}
	}
	return v, at, nil
}
