package bootimage

import (
	"encoding/json"
	"strings"
)

// AttemptsAnnotation on a MachineSet or ControlPlaneMachineSet records how often the operator
// patched it to one target, so a hot loop is still detected after a restart.
const AttemptsAnnotation = "bootimage.openshift.io/update-attempts"

// Attempts is the value of AttemptsAnnotation. Generation is MachineConfiguration/cluster's
// generation when counting began: opting out and back in changes it, which starts a new count.
type Attempts struct {
	Target     string `json:"target"`
	Count      int    `json:"count"`
	Generation int64  `json:"generation"`
}

// ParseAttempts reads the annotation; anything unreadable counts as no attempts.
func ParseAttempts(annotations map[string]string) Attempts {
	var a Attempts
	if v, ok := annotations[AttemptsAnnotation]; ok {
		_ = json.Unmarshal([]byte(v), &a)
	}
	return a
}

// For returns how many patches to target were made under generation.
func (a Attempts) For(target string, generation int64) int {
	if a.Target != target || a.Generation != generation {
		return 0
	}
	return a.Count
}

// Next returns the attempts after one more patch to target under generation.
func (a Attempts) Next(target string, generation int64) Attempts {
	return Attempts{Target: target, Count: a.For(target, generation) + 1, Generation: generation}
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
