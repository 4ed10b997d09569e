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
	Client client.Client
	Gates  featuregates.Source
	Images bootimage.Catalog
}

// ready is false until MachineConfiguration/cluster exists and its status was computed for its
// current generation: deciding earlier would report MachineSets as not selected only because the
// status is not there yet. Its status update triggers the decisions.
func (in clusterInputs) load(ctx context.Context) (cluster bootimage.Cluster, generation int64, ready bool, err error) {
	infra := &configv1.Infrastructure{}
	if err := in.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); client.IgnoreNotFound(err) != nil {
		return cluster, 0, false, err
	}
	cluster.Platform = platformOf(infra)
	cluster.InfrastructureName = infra.Status.InfrastructureName

	gates, gatesErr := in.Gates.Current(ctx)
	if gatesErr == nil {
		cluster.Gates = gates
	}
	cluster.GatesError = gatesErr

	mc := &operatorv1.MachineConfiguration{}
	if err := in.Client.Get(ctx, client.ObjectKey{Name: MachineConfigurationName}, mc); err != nil {
		return cluster, 0, false, client.IgnoreNotFound(err)
	}
	if mc.Status.ObservedGeneration != mc.Generation {
		return cluster, 0, false, nil
	}
	cluster.Effective = mc.Status.ManagedBootImagesStatus

	cv := &configv1.ClusterVersion{}
	if err := in.Client.Get(ctx, client.ObjectKey{Name: "version"}, cv); client.IgnoreNotFound(err) != nil {
		return cluster, 0, false, err
	}
	cluster.Stable = len(cv.Status.History) > 0 && cv.Status.History[0].State == configv1.CompletedUpdate
	cluster.MultiArch = cv.Status.Desired.Architecture == configv1.ClusterVersionArchitectureMulti

	cm := &corev1.ConfigMap{}
	switch err := in.Client.Get(ctx, client.ObjectKey{Namespace: MCONamespace, Name: BootImagesConfigMapName}, cm); {
	case err == nil:
		cluster.BootImages = cm
	case !apierrors.IsNotFound(err):
		return cluster, 0, false, err
	}

	cluster.ControlPlaneArch, err = in.controlPlaneArch(ctx)
	cluster.Images = in.Images
	return cluster, mc.Generation, err == nil, err
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
