// Package kube is what both front ends, the operator's controllers and bootimagectl, read from a
// cluster and how: where the inputs live, the scheme, the cloud catalogues configured from the
// credentials Secrets, the control plane's architecture and the live feature gates. It holds no
// reconciler, so the CLI links none.
package kube

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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Where the cluster's inputs live.
const (
	MachineAPINamespace      = "openshift-machine-api"
	MCONamespace             = "openshift-machine-config-operator"
	BootImagesConfigMapName  = "coreos-bootimages"
	MachineConfigurationName = "cluster"
	// OSImageStreamName is the singleton OSImageStream (machineconfiguration.openshift.io/v1, 5.0 and later).
	OSImageStreamName = "cluster"
)

// Where vSphere settings live, as the installer writes them.
const (
	VSphereCredentialsNamespace = "kube-system"
	VSphereCredentialsSecret    = "vsphere-creds"
	InstallConfigConfigMap      = "cluster-config-v1"
)

// AddToScheme adds the Kubernetes and OpenShift types the operator reads and writes to s: the
// one list of them, for the operator (controllers.AddToScheme), bootimagectl and the tests.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, configv1.Install, operatorv1.Install, machinev1beta1.Install, machinev1.Install, mcfgv1.Install,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// NewScheme returns a new scheme with the types of AddToScheme.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	return s
}

// ControlPlaneArch returns the control plane's architecture by bootimage.ControlPlaneArch, from
// the metadata of the Nodes with a control-plane role label, one list per role: a decision reads
// it, and on a cluster of thousands of workers every other Node is a cost with no answer in it.
// The Nodes are read, never changed, so the cache's own objects are read rather than copies.
// fallback is the answer when no such node says.
func ControlPlaneArch(ctx context.Context, c client.Reader, fallback string) (string, error) {
	var labels []map[string]string
	if indexed, ok := c.(ControlPlaneIndexed); ok {
		// One list of the control-plane Nodes through the index, not a match of every Node's
		// labels per role on every decision. A reader without the index (the API server's
		// client) lists by role below.
		nodes := &metav1.PartialObjectMetadataList{}
		nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
		if err := indexed.Reader.List(ctx, nodes, client.MatchingFields{ControlPlaneNodeIndex: "true"}, client.UnsafeDisableDeepCopy); err == nil {
			for _, n := range nodes.Items {
				labels = append(labels, n.Labels)
			}
			return bootimage.ControlPlaneArch(labels, fallback), nil
		}
		c = indexed.Reader
	}
	for _, role := range bootimage.ControlPlaneRoles {
		hasRole, err := k8slabels.NewRequirement(role, selection.Exists, nil)
		if err != nil {
			return "", err
		}
		nodes := &metav1.PartialObjectMetadataList{}
		nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
		if err := c.List(ctx, nodes, client.MatchingLabelsSelector{Selector: k8slabels.NewSelector().Add(*hasRole)}, client.UnsafeDisableDeepCopy); err != nil {
			return "", fmt.Errorf("listing Nodes: %w", err)
		}
		for _, n := range nodes.Items {
			labels = append(labels, n.Labels)
		}
	}
	return bootimage.ControlPlaneArch(labels, fallback), nil
}

// ControlPlaneNodeIndex indexes the cached Nodes' metadata by whether they carry a control-plane
// role label ("true").
const ControlPlaneNodeIndex = "bootimage.controlPlaneNode"

// ControlPlaneIndexed is a cache reader that has ControlPlaneNodeIndex (IndexControlPlaneNodes).
type ControlPlaneIndexed struct{ client.Reader }

// IndexControlPlaneNodes registers ControlPlaneNodeIndex on the Nodes' metadata.
func IndexControlPlaneNodes(ctx context.Context, indexer client.FieldIndexer) error {
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return indexer.IndexField(ctx, node, ControlPlaneNodeIndex, func(o client.Object) []string {
		for _, role := range bootimage.ControlPlaneRoles {
			if _, ok := o.GetLabels()[role]; ok {
				return []string{"true"}
			}
		}
		return nil
	})
}

// OSStreamInputs reads what chooses the OS stream of objects without the osstream label: the
// MachineConfigPools, and OSImageStream cluster, nil where the cluster has none (before 5.0, or
// where the API does not serve it).
func OSStreamInputs(ctx context.Context, c client.Reader) ([]mcfgv1.MachineConfigPool, *mcfgv1.OSImageStream, error) {
	pools := &mcfgv1.MachineConfigPoolList{}
	// Read, never changed: the cache's own objects, not copies.
	if err := c.List(ctx, pools, client.UnsafeDisableDeepCopy); err != nil && !meta.IsNoMatchError(err) {
		return nil, nil, err
	}
	osImageStream := &mcfgv1.OSImageStream{}
	err := c.Get(ctx, client.ObjectKey{Name: OSImageStreamName}, osImageStream)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return pools.Items, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return pools.Items, osImageStream, nil
}
