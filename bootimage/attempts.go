package bootimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
)

// AttemptsAnnotation on a MachineSet or ControlPlaneMachineSet records how often the operator
// patched it to one target, so a hot loop is still detected after a restart.
const AttemptsAnnotation = "bootimage.openshift.io/update-attempts"

// Attempts is the value of AttemptsAnnotation. Selection is the SelectionKey under which counting
// began: choosing another selection starts a new count, an unrelated MachineConfiguration change
// does not. (Opting out and back in to the same selection is seen by the operator, which then
// ignores the count: see Object.OptedOut.)
type Attempts struct {
	Target    string `json:"target"`
	Count     int    `json:"count"`
	Selection string `json:"selection"`
}

// Attempts returns how often o was already patched to target under selection: the larger count of
// its memory and its annotation, which does not count once o was seen not selected since.
func (o Object) Attempts(target, selection string) int {
	persisted := 0
	if !o.OptedOut {
		persisted = parseAttempts(o.Annotations).For(target, selection)
	}
	return max(o.Patched.For(target, selection), persisted)
}

// NextAttempts returns the attempts to record with a patch of o to target on cluster.
func (o Object) NextAttempts(cluster Cluster, target string) Attempts {
	selection := o.selectionKey(cluster.Effective)
	return Attempts{Target: target, Count: o.Attempts(target, selection) + 1, Selection: selection}
}

// SelectionKey identifies how the Machine API's resource is selected in the effective
// configuration, "" when it has no entry.
func SelectionKey(effective operatorv1.ManagedBootImages, resource operatorv1.MachineManagerMachineSetsResourceType) string {
	return selectionKeyIn(effective, operatorv1.MachineAPI, resource)
}

// SelectionsKey identifies every selection the operator decides on, the Cluster API ones
// included: the inputs' version changes with any of them.
func SelectionsKey(effective operatorv1.ManagedBootImages) string {
	return strings.Join([]string{
		selectionKeyIn(effective, operatorv1.MachineAPI, operatorv1.MachineSets),
		selectionKeyIn(effective, operatorv1.MachineAPI, operatorv1.ControlPlaneMachineSets),
		selectionKeyIn(effective, ClusterAPIGroup, operatorv1.MachineSets),
		selectionKeyIn(effective, ClusterAPIGroup, MachineDeployments),
	}, "/")
}

// selectionKey is SelectionKey for o's own API group: a Cluster API MachineSet's entry is not the
// Machine API's.
func (o Object) selectionKey(effective operatorv1.ManagedBootImages) string {
	group := o.APIGroup
	if group == "" {
		group = operatorv1.MachineAPI
	}
	return selectionKeyIn(effective, group, o.Resource)
}

func selectionKeyIn(effective operatorv1.ManagedBootImages, group operatorv1.MachineManagerMachineSetsAPIGroupType, resource operatorv1.MachineManagerMachineSetsResourceType) string {
	entry, ok := findEntryIn(effective.MachineManagers, group, resource)
	if !ok {
		return ""
	}
	raw, _ := json.Marshal(entry.Selection)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// parseAttempts reads the annotation; anything unreadable counts as no attempts.
func parseAttempts(annotations map[string]string) Attempts {
	var a Attempts
	if v, ok := annotations[AttemptsAnnotation]; ok {
		_ = json.Unmarshal([]byte(v), &a)
	}
	return a
}

// For returns how many patches to target were made under selection.
func (a Attempts) For(target, selection string) int {
	if a.Target != target || a.Selection != selection {
		return 0
	}
	return a.Count
}

// String encodes a for the annotation.
func (a Attempts) String() string {
	out, _ := json.Marshal(a)
	return string(out)
}

// AnnotationPatchOp returns the JSON Patch operation that sets annotation key to value on an
// object whose annotations are current.
func AnnotationPatchOp(current map[string]string, key, value string) PatchOp {
	if current == nil {
		return PatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{key: value}}
	}
	escaped := strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
	return PatchOp{Op: "add", Path: "/metadata/annotations/" + escaped, Value: value}
}

// UserDataSecretName returns providerSpec.userDataSecret.name, "" when absent or unreadable.
func UserDataSecretName(providerSpec []byte) string {
	var ps struct {
		UserDataSecret struct {
			Name string `json:"name"`
		} `json:"userDataSecret"`
	}
	_ = json.Unmarshal(providerSpec, &ps)
	return ps.UserDataSecret.Name
}
