package controllers

import (
	"context"
	"runtime"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// Where the cluster's inputs live.
const (
	MachineAPINamespace     = "openshift-machine-api"
	MCONamespace            = "openshift-machine-config-operator"
	BootImagesConfigMapName = "coreos-bootimages"
)

// controlPlaneRoles label the nodes whose architecture is the control plane's.
var controlPlaneRoles = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// clusterInputs reads, from the cache, everything a decision needs besides the object itself.
// generation is MachineConfiguration/cluster's, which scopes the hot-loop count.
type clusterInputs struct {
	Client  client.Client
	Gates   featuregates.Source
	Images  bootimage.Catalog
	Streams *bootimage.StreamCache
	// Templates reads vCenter templates for vSphere decisions.
	Templates bootimage.VSphereTemplates
}

// ready is false until MachineConfiguration/cluster exists and its status was computed for its
// current generation: deciding earlier would report MachineSets as not selected only because the
// status is not there yet. Its status update triggers the decisions.
func (in clusterInputs) load(ctx context.Context) (cluster bootimage.Cluster, generation int64, ready bool, err error) {
	mc := &operatorv1.MachineConfiguration{}
	if err := in.Client.Get(ctx, client.ObjectKey{Name: MachineConfigurationName}, mc); err != nil {
		return cluster, 0, false, client.IgnoreNotFound(err)
	}
	if mc.Status.ObservedGeneration != mc.Generation {
		return cluster, 0, false, nil
	}
	objs := bootimage.ClusterObjects{Effective: mc.Status.ManagedBootImagesStatus, Images: in.Images, Streams: in.Streams, Templates: in.Templates}
	if objs.Infrastructure, err = getOptional(ctx, in.Client, client.ObjectKey{Name: "cluster"}, &configv1.Infrastructure{}); err != nil {
		return cluster, 0, false, err
	}
	if objs.ClusterVersion, err = getOptional(ctx, in.Client, client.ObjectKey{Name: "version"}, &configv1.ClusterVersion{}); err != nil {
		return cluster, 0, false, err
	}
	if objs.BootImages, err = getOptional(ctx, in.Client, client.ObjectKey{Namespace: MCONamespace, Name: BootImagesConfigMapName}, &corev1.ConfigMap{}); err != nil {
		return cluster, 0, false, err
	}
	gates, gatesErr := in.Gates.Current(ctx)
	if gatesErr == nil {
		objs.Gates = gates
	}
	objs.GatesError = gatesErr
	if objs.ControlPlaneArch, err = in.controlPlaneArch(ctx); err != nil {
		return cluster, 0, false, err
	}
	return bootimage.NewCluster(objs), mc.Generation, true, nil
}

// getOptional gets key into obj, returning nil when it does not exist.
func getOptional[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, obj T) (T, error) {
	var none T
	err := c.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil {
		return none, err
	}
	return obj, nil
}

// controlPlaneArch is the kubernetes.io/arch of the control-plane nodes, else this process's.
func (in clusterInputs) controlPlaneArch(ctx context.Context) (string, error) {
	for _, role := range controlPlaneRoles {
		nodes := &metav1.PartialObjectMetadataList{}
		nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
		if err := in.Client.List(ctx, nodes, client.HasLabels{role}); err != nil {
			return "", err
		}
		for _, n := range nodes.Items {
			if arch := n.Labels[corev1.LabelArchStable]; arch != "" {
				return arch, nil
			}
		}
	}
	return runtime.GOARCH, nil
}
