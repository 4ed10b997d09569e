// Package capi makes the writes of a Cluster API boot image update that need the API server's
// answer: create the template copy (or find the one an earlier pass made), recognise an owner
// patch refused by its precondition, and delete a copy only if it is still the one decided on.
// What to write is the domain's decision (clusterapi.TemplateCopy, InfrastructureRefPatch,
// DeletableTemplates).
package capi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
)

// ErrTemplateConflict: a template of the copy's name exists and is not that copy. It is never
// overwritten.
var ErrTemplateConflict = errors.New("template conflict")

// EnsureTemplate creates copy, made for d. When a template of its name exists already (an earlier
// pass that stopped before pointing the owner at it), it is reused if it is the same copy
// (clusterapi.SameTemplateCopy), and is ErrTemplateConflict otherwise. It reports whether it
// created the template.
func EnsureTemplate(ctx context.Context, c client.Client, copy *unstructured.Unstructured, d bootimage.Decision) (bool, error) {
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
	if !clusterapi.SameTemplateCopy(existing, copy.GetKind(), d) {
		return false, fmt.Errorf("%w: %s %s/%s exists and is not this operator's copy of that spec", ErrTemplateConflict, copy.GetKind(), copy.GetNamespace(), copy.GetName())
	}
	return false, nil
}

// OwnerMoved reports whether err is the API server refusing an owner patch for its
// preconditions: the owner changed since it was read (409 Conflict on the resourceVersion) or its
// infrastructureRef did (the test operation failed), and nothing was written.
func OwnerMoved(err error) bool {
	return apierrors.IsConflict(err) || (apierrors.IsInvalid(err) && strings.Contains(err.Error(), "testing value"))
}

// DeniedByPolicy returns what a ValidatingAdmissionPolicy said when it refused err's write (422
// Invalid, "... is forbidden: ValidatingAdmissionPolicy '<name>' with binding '<binding>' denied
// request: ..."), "" for any other error. Such a refusal lasts until the object or the policy
// changes; 403 Forbidden is RBAC's, and is not one.
func DeniedByPolicy(err error) string {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return ""
	}
	msg := status.Status().Message
	if !strings.Contains(msg, "ValidatingAdmissionPolicy") || !strings.Contains(msg, "denied request") {
		return ""
	}
	return msg
}

// DeleteTemplate deletes template if it still has the UID it was decided on, so that a template
// recreated under the same name meanwhile is not deleted.
func DeleteTemplate(ctx context.Context, c client.Client, template *unstructured.Unstructured) error {
	uid := template.GetUID()
	err := c.Delete(ctx, template, client.Preconditions(metav1.Preconditions{UID: &uid}))
	return client.IgnoreNotFound(err)
}
