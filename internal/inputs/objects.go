package inputs

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Objects is a client.Reader over a fixed set of objects, the files of `bootimagectl plan -f`:
// Get and List by kind, namespace and name (List also by label selector), into typed objects of
// the scheme, unstructured ones or metadata only, as a client reads the API server. Objects are
// matched by group and kind, whatever the version asked for (a server converts between its
// versions; here each object has the one it was given in). Each read returns a copy. Field
// selectors are refused: nothing the loader reads uses them.
type Objects struct {
	scheme *runtime.Scheme
	byKind map[schema.GroupKind][]client.Object
	mapper *apimeta.DefaultRESTMapper
}

// NewObjects returns the reader of objs, which are typed objects of scheme or unstructured ones
// with their kind. Of objects of the same kind, namespace and name the last is read.
func NewObjects(scheme *runtime.Scheme, objs []client.Object) (*Objects, error) {
	o := &Objects{scheme: scheme, byKind: map[schema.GroupKind][]client.Object{}}
	seen := map[schema.GroupKind]map[client.ObjectKey]int{}
	// Every kind given is served, in the version it is first given in; its scope is not known
	// here, and nothing the loader reads asks for it.
	var served []schema.GroupVersionKind
	var versions []schema.GroupVersion
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return nil, err
		}
		gk := gvk.GroupKind()
		if seen[gk] == nil {
			seen[gk] = map[client.ObjectKey]int{}
			served, versions = append(served, gvk), append(versions, gvk.GroupVersion())
		}
		key := client.ObjectKeyFromObject(obj)
		if i, ok := seen[gk][key]; ok {
			o.byKind[gk][i] = obj
			continue
		}
		seen[gk][key] = len(o.byKind[gk])
		o.byKind[gk] = append(o.byKind[gk], obj)
	}
	o.mapper = apimeta.NewDefaultRESTMapper(versions)
	for _, gvk := range served {
		o.mapper.Add(gvk, apimeta.RESTScopeNamespace)
	}
	for _, list := range o.byKind {
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.GetNamespace() != b.GetNamespace() {
				return a.GetNamespace() < b.GetNamespace()
			}
			return a.GetName() < b.GetName()
		})
	}
	return o, nil
}

// RESTMapper maps the kinds among the objects, each to the version it was given in; any other
// kind is not served (a NoKindMatchError).
func (o *Objects) RESTMapper() apimeta.RESTMapper { return o.mapper }

// Get reads the object of key and obj's kind into obj; a NotFound error when there is none.
func (o *Objects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, o.scheme)
	if err != nil {
		return err
	}
	for _, stored := range o.byKind[gvk.GroupKind()] {
		if stored.GetNamespace() == key.Namespace && stored.GetName() == key.Name {
			return o.into(stored, obj, gvk)
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}, key.Name)
}

// List reads the objects of list's item kind that opts select (namespace, labels) into list.
func (o *Objects) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	listOpts := (&client.ListOptions{}).ApplyOptions(opts)
	if listOpts.FieldSelector != nil && !listOpts.FieldSelector.Empty() {
		return fmt.Errorf("listing from files: field selectors are not supported (%s)", listOpts.FieldSelector)
	}
	gvk, err := apiutil.GVKForObject(list, o.scheme)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(gvk.Kind, "List") {
		return fmt.Errorf("listing from files: %s is not a list kind", gvk)
	}
	item := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
	var items []runtime.Object
	for _, stored := range o.byKind[item.GroupKind()] {
		if listOpts.Namespace != "" && stored.GetNamespace() != listOpts.Namespace {
			continue
		}
		if listOpts.LabelSelector != nil && !listOpts.LabelSelector.Matches(labels.Set(stored.GetLabels())) {
			continue
		}
		dst, err := o.newItem(list, item)
		if err != nil {
			return err
		}
		if err := o.into(stored, dst, item); err != nil {
			return err
		}
		items = append(items, dst)
	}
	switch l := list.(type) {
	case *unstructured.UnstructuredList:
		l.Items = make([]unstructured.Unstructured, len(items))
		for i, it := range items {
			l.Items[i] = *it.(*unstructured.Unstructured)
		}
		return nil
	case *metav1.PartialObjectMetadataList:
		l.Items = make([]metav1.PartialObjectMetadata, len(items))
		for i, it := range items {
			l.Items[i] = *it.(*metav1.PartialObjectMetadata)
		}
		return nil
	}
	return apimeta.SetList(list, items)
}

// newItem returns an empty item of list, of kind item.
func (o *Objects) newItem(list client.ObjectList, item schema.GroupVersionKind) (client.Object, error) {
	switch list.(type) {
	case *unstructured.UnstructuredList:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(item)
		return u, nil
	case *metav1.PartialObjectMetadataList:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(item)
		return m, nil
	}
	obj, err := o.scheme.New(item)
	if err != nil {
		return nil, err
	}
	c, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", item)
	}
	return c, nil
}

// into copies src into dst, which was asked for as gvk.
func (o *Objects) into(src, dst client.Object, gvk schema.GroupVersionKind) error {
	switch d := dst.(type) {
	case *unstructured.Unstructured:
		content, err := toUnstructured(src)
		if err != nil {
			return err
		}
		d.Object = content
		if d.GetAPIVersion() == "" || d.GetKind() == "" {
			d.SetGroupVersionKind(gvk)
		}
		return nil
	case *metav1.PartialObjectMetadata:
		content, err := toUnstructured(src)
		if err != nil {
			return err
		}
		m, _ := content["metadata"].(map[string]any)
		d.ObjectMeta = metav1.ObjectMeta{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &d.ObjectMeta); err != nil {
			return err
		}
		d.SetGroupVersionKind(gvk)
		return nil
	}
	if reflect.TypeOf(src) == reflect.TypeOf(dst) {
		reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
		return nil
	}
	content, err := toUnstructured(src)
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(content, dst)
}

// toUnstructured returns a copy of obj's content.
func toUnstructured(obj client.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return runtime.DeepCopyJSON(u.Object), nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}
