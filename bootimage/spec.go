package bootimage

import (
	"encoding/json"
	"fmt"
)

// MachineSpec is the machine spec whose boot image a platform reads and patches: a Machine API
// providerSpec.value, or the spec.template.spec of a Cluster API infrastructure machine template.
// Its values are kept as their raw bytes, so a patch built from it carries every field it does not
// change exactly as read.
type MachineSpec struct {
	// TemplateKind is the Cluster API template's kind (AWSMachineTemplate, ...); "" for a
	// Machine API providerSpec.
	TemplateKind string
	fields       rawObject
}

// Template reports whether s is a Cluster API template's spec.template.spec.
func (s MachineSpec) Template() bool { return s.TemplateKind != "" }

func (s MachineSpec) where() string {
	if s.Template() {
		return s.TemplateKind + " spec.template.spec"
	}
	return "providerSpec"
}

// Invalid returns d as an Error: s cannot be read, as format says.
func (s MachineSpec) Invalid(d Decision, format string, args ...any) Decision {
	return d.With(Error, ReasonInvalidProviderSpec, "%s: %s", s.where(), fmt.Sprintf(format, args...))
}

// Field decodes key of s into v; a missing key leaves v alone.
func (s MachineSpec) Field(key string, v any) error { return s.fields.field(key, v) }

// rawObject is a JSON object whose values are kept as their raw bytes.
type rawObject map[string]json.RawMessage

func parseProviderSpec(raw []byte) (rawObject, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("empty")
	}
	var obj rawObject
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %s", jsonProblem(err))
	}
	if obj == nil {
		return nil, fmt.Errorf("null")
	}
	return obj, nil
}

// field decodes key of o into v; a missing key leaves v alone.
func (o rawObject) field(key string, v any) error {
	raw, ok := o[key]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("field %s: %s", key, jsonProblem(err))
	}
	return nil
}

// PatchOp is one JSON Patch (RFC 6902) operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// Set returns the operation that sets path (relative to the machine spec) to value, whether or
// not it exists: JSON Patch "add" replaces an existing member.
func Set(path string, value any) PatchOp { return PatchOp{Op: "add", Path: path, Value: value} }

// JSONPatch returns the JSON Patch that applies d to an object whose providerSpec.value is at
// prefix, with the resourceVersion the decision was made on: the API server refuses the patch
// with a conflict if the object changed since. Nothing but the image fields is touched.
func (d Decision) JSONPatch(prefix, resourceVersion string, extra ...PatchOp) ([]byte, error) {
	ops := []PatchOp{Set("/metadata/resourceVersion", resourceVersion)}
	for _, op := range d.ProviderSpecPatch {
		op.Path = prefix + op.Path
		ops = append(ops, op)
	}
	return json.Marshal(append(ops, extra...))
}
