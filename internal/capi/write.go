// Package capi makes the writes of a Cluster API boot image update: create the template copy,
// then point its MachineSet or MachineDeployment at it in one guarded patch, and delete copies
// nothing uses any more. What to write is the domain's decision (bootimage); this package only
// writes it, so that a crash, a name clash or a concurrent edit never loses or overwrites anything.
package capi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrTemplateConflict: a template of the copy's name exists with another spec. It is never
// overwritten.
var ErrTemplateConflict = errors.New("template conflict")

// ErrOwnerMoved: the owner's infrastructureRef no longer names the template the decision was made
// from; nothing was written and the owner must be decided again.
var ErrOwnerMoved = errors.New("infrastructureRef changed meanwhile")

// EnsureTemplate creates copy. When a template of its name exists already (an earlier pass that
// stopped before pointing the owner at it), it is reused if its spec equals copy's, and is
// ErrTemplateConflict otherwise. It reports whether it created the template.
func EnsureTemplate(ctx context.Context, c client.Client, copy *unstructured.Unstructured) (bool, error) {
	err := c.Create(ctx, copy.DeepCopy())
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(copy.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(copy), existing); err != nil {
		return false, err
	}
	if !apiequality.Semantic.DeepEqual(existing.Object["spec"], copy.Object["spec"]) {
		return false, fmt.Errorf("%w: %s %s/%s exists with another spec", ErrTemplateConflict, copy.GetKind(), copy.GetNamespace(), copy.GetName())
	}
	return false, nil
}

// PointOwner patches owner's spec.template.spec.infrastructureRef.name from oldName to newName,
// with annotations set, in one JSON patch whose first operation tests that the reference is still
// oldName: a concurrent change of it makes the patch fail with ErrOwnerMoved, writing nothing.
func PointOwner(ctx context.Context, c client.Client, owner *unstructured.Unstructured, oldName, newName string, annotations map[string]string) error {
	const ref = "/spec/template/spec/infrastructureRef/name"
	ops := []map[string]any{
		{"op": "test", "path": ref, "value": oldName},
		{"op": "replace", "path": ref, "value": newName},
	}
	if len(annotations) > 0 && owner.GetAnnotations() == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": annotations})
	} else {
		for _, k := range slices.Sorted(maps.Keys(annotations)) {
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + escape(k), "value": annotations[k]})
		}
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	err = c.Patch(ctx, owner, client.RawPatch(types.JSONPatchType, body))
	if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "testing value") {
		return fmt.Errorf("%w: %s %s/%s", ErrOwnerMoved, owner.GetKind(), owner.GetNamespace(), owner.GetName())
	}
	return err
}

// escape escapes a JSON pointer token (RFC 6901).
func escape(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// DeleteTemplate deletes template if it still has the UID it was decided on, so that a template
// recreated under the same name meanwhile is not deleted.
func DeleteTemplate(ctx context.Context, c client.Client, template *unstructured.Unstructured) error {
	uid := template.GetUID()
	err := c.Delete(ctx, template, client.Preconditions(metav1.Preconditions{UID: &uid}))
	return client.IgnoreNotFound(err)
}
