package clusterapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Infrastructure machine templates are immutable: an update copies the template with the new boot
// image and points the owner at the copy. Our copies are recognised by TemplateCopyLabel; their
// names cannot be cluster-capi-operator's (or the MCO draft's), which end in 8 hex digits, as
// ours end in 10.
const (
	// TemplateCopyLabel marks the templates this operator created; only they are ever deleted.
	TemplateCopyLabel = "bootimage.openshift.io/template-copy"
	// TemplateOwnerAnnotation on a copy names the object it was made for: <Kind>/<name>. It is
	// what a delete checks.
	TemplateOwnerAnnotation = "bootimage.openshift.io/template-owner"
	// templateOwnerLabel on a copy is a hash of <Kind>/<name> of the object it was made for (a
	// name does not fit a label value), so that an owner's copies are selected by the API server.
	templateOwnerLabel = "bootimage.openshift.io/template-owner-hash"
	// copiedFromAnnotation on a copy names the template it was copied from.
	copiedFromAnnotation = "bootimage.openshift.io/copied-from"

	// templateHashLength is the hex digits of the name suffix.
	templateHashLength = 10
	// maxNameLength is the longest object name the API server takes.
	maxNameLength = 253
	// TemplateGCGrace is how old an unreferenced copy must be before it may be deleted, so a copy
	// made by an update whose owner patch is under way is not taken away from it.
	TemplateGCGrace = 10 * time.Minute
)

// infrastructureRefNamePath is the owner's field naming its template.
const infrastructureRefNamePath = "/spec/template/spec/infrastructureRef/name"

// TemplateCopy returns the template to create for d, an Update of a Cluster API object whose
// template, as read from the server, is template: a deep copy in which only the boot image field
// changed (every other field kept, known to this binary or not), with metadata reduced to what a
// new object needs: the labels but cluster-capi-operator's, TemplateCopyLabel, TemplateOwnerAnnotation
// and CopiedFromAnnotation, and the owner references without blockOwnerDeletion. Its name is
// templateCopyName's.
func TemplateCopy(template *unstructured.Unstructured, d bootimage.Decision) (*unstructured.Unstructured, error) {
	if d.Action != bootimage.Update || len(d.ProviderSpecPatch) == 0 {
		return nil, fmt.Errorf("%s %s: no update to copy a template for", d.Kind, d.Name)
	}
	raw, err := template.MarshalJSON()
	if err != nil {
		return nil, err
	}
	patch, err := templatePatch(d)
	if err != nil {
		return nil, err
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		return nil, fmt.Errorf("setting the boot image of %s %s: %w", template.GetKind(), template.GetName(), err)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(patched); err != nil {
		return nil, err
	}
	labels := out.GetLabels()
	delete(labels, CAPIOperatorTemplateLabel)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, TemplateCopyLabels(d.Kind, d.Name))
	owners := out.GetOwnerReferences()
	for i := range owners {
		owners[i].BlockOwnerDeletion = nil
	}
	out.Object["metadata"] = map[string]any{}
	out.SetNamespace(template.GetNamespace())
	out.SetLabels(labels)
	out.SetAnnotations(map[string]string{TemplateOwnerAnnotation: d.Kind + "/" + d.Name, copiedFromAnnotation: template.GetName()})
	out.SetOwnerReferences(owners)
	delete(out.Object, "status")
	name, err := templateCopyName(d.Kind, d.Name, out)
	if err != nil {
		return nil, err
	}
	out.SetName(name)
	return out, nil
}

// templatePatch is d's boot image patch on a template: its operations under spec.template.spec.
func templatePatch(d bootimage.Decision) (jsonpatch.Patch, error) {
	ops := make([]bootimage.PatchOp, len(d.ProviderSpecPatch))
	for i, op := range d.ProviderSpecPatch {
		op.Path = "/spec/template/spec" + op.Path
		ops[i] = op
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return jsonpatch.DecodePatch(raw)
}

// TemplateCopyLabels are the labels of the copies made for the owner of kind and name, and the
// selector of that owner's copies.
func TemplateCopyLabels(kind, name string) map[string]string {
	sum := sha256.Sum256([]byte(kind + "/" + name))
	return map[string]string{TemplateCopyLabel: "true", templateOwnerLabel: hex.EncodeToString(sum[:])[:40]}
}

// templateCopyName is the name of the copy of template made for the owner of kind and name:
// <owner>-<10 hex digits of sha256(kind, name, json(spec))>, the owner's name shortened to fit.
// The same owner and spec always give the same name, so a copy left by a crash between its
// creation and the owner's patch is found and reused.
func templateCopyName(kind, name string, template *unstructured.Unstructured) (string, error) {
	spec, err := json.Marshal(template.Object["spec"])
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(kind + "\x00" + name + "\x00" + string(spec)))
	suffix := hex.EncodeToString(sum[:])[:templateHashLength]
	prefix := name[:min(len(name), maxNameLength-len(suffix)-1)]
	return strings.TrimRight(prefix, "-.") + "-" + suffix, nil
}

// SameTemplateCopy reports whether existing, found under the name of the copy TemplateCopy makes
// for d, is that copy: of the same kind, ours (TemplateCopyLabel) and made for d's owner
// (TemplateOwnerAnnotation), holding every value d's patch sets. What this operator set is
// compared, not the stored bytes, which CRD defaults and defaulting webhooks add to. Anything else
// under that name is a clash to report, never to overwrite.
func SameTemplateCopy(existing *unstructured.Unstructured, kind string, d bootimage.Decision) bool {
	if existing.GetKind() != kind || existing.GetLabels()[TemplateCopyLabel] != "true" ||
		existing.GetAnnotations()[TemplateOwnerAnnotation] != d.Kind+"/"+d.Name || len(d.ProviderSpecPatch) == 0 {
		return false
	}
	raw, err := existing.MarshalJSON()
	if err != nil {
		return false
	}
	patch, err := templatePatch(d)
	if err != nil {
		return false
	}
	patched, err := patch.Apply(raw)
	return err == nil && jsonpatch.Equal(raw, patched)
}

// TemplateConflict returns the Error d, an Update, becomes when a template of the copy's name
// exists and is not that copy: it is never overwritten.
func TemplateConflict(d bootimage.Decision, name string) bootimage.Decision {
	d.ProviderSpecPatch = nil
	return d.With(bootimage.Error, bootimage.ReasonTemplateConflict, "template %s/%s exists and is not this operator's copy of the template with %s: delete or rename it; it is never overwritten", d.Namespace, name, d.Target)
}

// DeniedByPolicy returns the Skip decision for d when an admission policy refused its write with
// said (the policy's own words): no retry until the object or the cluster's inputs change.
func DeniedByPolicy(d bootimage.Decision, said string) bootimage.Decision {
	d.ProviderSpecPatch = nil
	return d.With(bootimage.Skip, bootimage.ReasonDeniedByPolicy, "boot image update to %s refused by admission: %s", d.Target, said)
}

// InfrastructureRefPatch returns the JSON Patch that points a Cluster API MachineSet or
// MachineDeployment at template newName, on the condition that it still names oldName and is still
// at resourceVersion, the one decided on (the API server refuses it otherwise: 422 for the test,
// 409 for the version), with extra operations (the update-attempts annotation) in the same write.
// The version guard is what makes an annotations map written whole safe: it is the map read.
func InfrastructureRefPatch(resourceVersion, oldName, newName string, extra ...bootimage.PatchOp) ([]byte, error) {
	ops := []bootimage.PatchOp{bootimage.Set("/metadata/resourceVersion", resourceVersion),
		{Op: "test", Path: infrastructureRefNamePath, Value: oldName}, {Op: "replace", Path: infrastructureRefNamePath, Value: newName}}
	return json.Marshal(append(ops, extra...))
}

// TemplateUse is what still needs the templates of one namespace.
type TemplateUse struct {
	// Owners are the infrastructureRefs of every Cluster API MachineSet and MachineDeployment.
	Owners []TemplateRef
	// ClonedFrom are the annotations of every Machine and infrastructure machine (AWSMachine, ...).
	ClonedFrom []map[string]string
}

// templateCopiesOf returns the copies among templates that TemplateOwnerAnnotation says were made
// for the owner of kind and name, but current, the one it names now.
func templateCopiesOf(templates []unstructured.Unstructured, kind, name, current string) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, t := range templates {
		if t.GetAnnotations()[TemplateOwnerAnnotation] == kind+"/"+name && t.GetName() != current {
			out = append(out, t)
		}
	}
	return out
}

// DeletableTemplates returns, sorted by name, the templates that may be deleted: our own copies
// (TemplateCopyLabel) created before cutoff (TemplateGCGrace ago, so that a copy whose owner
// patch is under way is not taken from it) that no MachineSet or MachineDeployment
// references and no Machine or infrastructure machine was cloned from. A template that
// cluster-capi-operator labelled is never one. Names are compared whatever the kind, so a name in
// use keeps every template of that name.
func DeletableTemplates(templates []unstructured.Unstructured, use TemplateUse, cutoff time.Time) []string {
	inUse := map[string]bool{}
	for _, ref := range use.Owners {
		inUse[ref.Name] = true
	}
	for _, annotations := range use.ClonedFrom {
		if name := annotations[ClonedFromNameAnnotation]; name != "" {
			inUse[name] = true
		}
	}
	var out []string
	for _, t := range templates {
		labels := t.GetLabels()
		if _, capiOperator := labels[CAPIOperatorTemplateLabel]; capiOperator || labels[TemplateCopyLabel] != "true" ||
			inUse[t.GetName()] || t.GetDeletionTimestamp() != nil || !t.GetCreationTimestamp().Time.Before(cutoff) {
			continue
		}
		out = append(out, t.GetName())
	}
	slices.Sort(out)
	return out
}
