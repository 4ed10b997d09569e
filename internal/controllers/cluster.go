package controllers

import (
	"context"
	"runtime"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// clusterInputs reads, from the cache, everything a decision needs besides the object itself.
type clusterInputs struct {
	Client client.Client
	Gates  featuregates.Reader
	// Clouds look the platforms' images up, vCenter templates included.
	Clouds  bootimage.Clouds
	Streams *bootimage.StreamCache
	// Namespace holds the coreos-bootimages ConfigMap.
	Namespace string
}

// ready is false until MachineConfiguration/cluster exists and its status was computed for its
// current generation: deciding earlier would report MachineSets as not selected only because the
// status is not there yet. Its status update triggers the decisions.
func (in clusterInputs) load(ctx context.Context) (loaded loadedInputs, ready bool, err error) {
	mc := &operatorv1.MachineConfiguration{}
	if err := in.Client.Get(ctx, client.ObjectKey{Name: kube.MachineConfigurationName}, mc); err != nil {
		return loaded, false, client.IgnoreNotFound(err)
	}
	if mc.Status.ObservedGeneration != mc.Generation {
		return loaded, false, nil
	}
	objs := bootimage.ClusterObjects{Effective: mc.Status.ManagedBootImagesStatus, Clouds: in.Clouds, Streams: in.Streams}
	if objs.Infrastructure, err = getOptional(ctx, in.Client, client.ObjectKey{Name: "cluster"}, &configv1.Infrastructure{}); err != nil {
		return loaded, false, err
	}
	if objs.ClusterVersion, err = getOptional(ctx, in.Client, client.ObjectKey{Name: "version"}, &configv1.ClusterVersion{}); err != nil {
		return loaded, false, err
	}
	if objs.BootImages, err = getOptional(ctx, in.Client, client.ObjectKey{Namespace: in.Namespace, Name: kube.BootImagesConfigMapName}, &corev1.ConfigMap{}); err != nil {
		return loaded, false, err
	}
	gates, gatesErr := in.Gates.Current(ctx)
	if gatesErr == nil {
		objs.Gates = gates
	}
	objs.GatesError = gatesErr
	if objs.ControlPlaneArch, err = ControlPlaneArch(ctx, in.Client); err != nil {
		return loaded, false, err
	}
	if objs.Pools, objs.OSImageStream, err = kube.OSStreamInputs(ctx, in.Client); err != nil {
		return loaded, false, err
	}
	cluster := bootimage.NewCluster(objs)
	return loadedInputs{cluster: cluster, version: inputsVersion(mc, objs.BootImages, cluster.OSStreamsKey())}, true, nil
}

// loadedInputs are the inputs of the decisions and their version.
type loadedInputs struct {
	cluster bootimage.Cluster
	version string
}

// inputsVersion identifies the stream, the OS stream choices and the selection decisions are taken on: a decision taken
// on another version is not current, and its object counts as pending in the progress conditions.
func inputsVersion(mc *operatorv1.MachineConfiguration, bootImages *corev1.ConfigMap, osStreams string) string {
	stream := "none"
	if bootImages != nil {
		stream = bootImages.ResourceVersion
	}
	return stream + "/" + bootimage.SelectionsKey(mc.Status.ManagedBootImagesStatus) + "/" + osStreams
}

// getOptional gets key into obj, returning nil when it does not exist.
func getOptional[T client.Object](ctx context.Context, c client.Reader, key client.ObjectKey, obj T) (T, error) {
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

// ControlPlaneArch returns the control plane's architecture; without a node that says, the
// operator's own, as it runs on the control plane.
func ControlPlaneArch(ctx context.Context, c client.Reader) (string, error) {
	return kube.ControlPlaneArch(ctx, c, runtime.GOARCH)
}
