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
// ignores the count: see controllers.Tracker.)
type Attempts struct {
	Target    string `json:"target"`
	Count     int    `json:"count"`
	Selection string `json:"selection"`
}

// SelectionKey identifies how resource is selected in the effective configuration, "" when it has
// no entry.
func SelectionKey(effective operatorv1.ManagedBootImages, resource operatorv1.MachineManagerMachineSetsResourceType) string {
	entry, ok := findEntry(effective.MachineManagers, resource)
	if !ok {
		return ""
	}
	raw, _ := json.Marshal(entry.Selection)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// ParseAttempts reads the annotation; anything unreadable counts as no attempts.
func ParseAttempts(annotations map[string]string) Attempts {
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

// Next returns the attempts after one more patch to target under selection.
func (a Attempts) Next(target, selection string) Attempts {
	return Attempts{Target: target, Count: a.For(target, selection) + 1, Selection: selection}
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
