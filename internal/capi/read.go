package capi

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
)

// Template reads, through r, the infrastructure machine template owner names, as it is on the
// server; nil when the reference is unreadable, its kind is not served or the template is not
// found (the decision says so).
func Template(ctx context.Context, mapper apimeta.RESTMapper, r client.Reader, owner *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ref, err := clusterapi.InfrastructureRef(owner)
	if err != nil {
		return nil, nil
	}
	return TemplateNamed(ctx, mapper, r, owner, ref.Name)
}

// TemplateNamed reads, through r, the template name of the kind owner's reference names; nil when
// that kind is not served or the template is not found, an error when the reference is unreadable.
func TemplateNamed(ctx context.Context, mapper apimeta.RESTMapper, r client.Reader, owner *unstructured.Unstructured, name string) (*unstructured.Unstructured, error) {
	ref, err := clusterapi.InfrastructureRef(owner)
	if err != nil {
		return nil, err
	}
	mapping, err := mapper.RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if apimeta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t := &unstructured.Unstructured{}
	t.SetGroupVersionKind(mapping.GroupVersionKind)
	err = r.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, t)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return t, err
}
