package main

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/cpms"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// snapshot reads, once each, the objects a plan reads, where the operator reads them: the
// singletons, and one list of each kind in its namespace. A live plan then reads them as a plan of
// files does, so it makes the same few requests however many objects the cluster has (the direct
// client is rate-limited, and one read per object and its twin, template and Cluster would take
// minutes on a large cluster). A kind that is not served is left out, as it is absent.
// snapshotKinds are the kinds of openshift-cluster-api a plan reads: the Cluster API objects,
// their Clusters, and the templates of the registered platforms' kinds the API serves.
func snapshotKinds(mapper apimeta.RESTMapper) ([]schema.GroupVersionKind, error) {
	kinds := []schema.GroupVersionKind{
		clusterapi.GroupVersion.WithKind(bootimage.KindMachineSet),
		clusterapi.GroupVersion.WithKind(bootimage.KindMachineDeployment),
		clusterapi.GroupVersion.WithKind("Cluster"),
	}
	for _, kind := range bootimage.TemplateKinds() {
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: clusterapi.InfrastructureGroup, Kind: kind})
		if apimeta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, mapping.GroupVersionKind)
	}
	return kinds, nil
}

func snapshot(ctx context.Context, c client.Client) ([]client.Object, error) {
	var objs []client.Object
	get := func(key client.ObjectKey, obj client.Object) error {
		err := c.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %T %s: %w", obj, key, err)
		}
		objs = append(objs, obj)
		return nil
	}
	singletons := []struct {
		key client.ObjectKey
		obj client.Object
	}{
		{client.ObjectKey{Name: "cluster"}, &configv1.Infrastructure{}},
		{client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{}},
		{client.ObjectKey{Name: "version"}, &configv1.ClusterVersion{}},
		{client.ObjectKey{Name: kube.MachineConfigurationName}, &operatorv1.MachineConfiguration{}},
		{client.ObjectKey{Name: kube.OSImageStreamName}, &mcfgv1.OSImageStream{}},
		{client.ObjectKey{Namespace: kube.MCONamespace, Name: kube.BootImagesConfigMapName}, &corev1.ConfigMap{}},
		{client.ObjectKey{Namespace: kube.MachineAPINamespace, Name: cpms.Name}, &machinev1.ControlPlaneMachineSet{}},
	}
	for _, s := range singletons {
		if err := get(s.key, s.obj); err != nil {
			return nil, err
		}
	}

	list := func(l client.ObjectList, namespace string) error {
		err := c.List(ctx, l, client.InNamespace(namespace))
		if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing %T in %q: %w", l, namespace, err)
		}
		return apimeta.EachListItem(l, func(o runtime.Object) error {
			objs = append(objs, o.(client.Object))
			return nil
		})
	}
	// The Nodes' metadata only, as the operator caches them.
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	typed := []struct {
		list      client.ObjectList
		namespace string
	}{
		{nodes, ""},
		{&mcfgv1.MachineConfigPoolList{}, ""},
		{&machinev1beta1.MachineSetList{}, kube.MachineAPINamespace},
		{&corev1.SecretList{}, kube.MachineAPINamespace},
	}
	for _, t := range typed {
		if err := list(t.list, t.namespace); err != nil {
			return nil, err
		}
	}
	for i := range nodes.Items {
		nodes.Items[i].SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	}

	kinds, err := snapshotKinds(c.RESTMapper())
	if err != nil {
		return nil, err
	}
	for _, gvk := range kinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := list(l, bootimage.ClusterAPINamespace); err != nil {
			return nil, err
		}
	}
	return objs, nil
}
