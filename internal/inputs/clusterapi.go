package inputs

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/internal/capi"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// ClusterAPI reads what the decision of a Cluster API MachineSet or MachineDeployment reads
// besides the cluster-wide Inputs.
type ClusterAPI struct {
	// Reader reads openshift-cluster-api (the operator's Cluster API cache), and Mapper maps the
	// kind of a template reference.
	Reader client.Reader
	Mapper apimeta.RESTMapper
	// Live, when set, is asked for a template the Reader does not have: a template created with
	// its owner may reach the cache after the owner's event, and is not missing then.
	Live client.Reader
	// MachineAPI reads the Machine API twins of MachineSets; nil when the Machine API is not
	// served, so there are none.
	MachineAPI client.Reader
	// Pause reads each owner's Cluster, for clusterapi.Paused (Cluster API's pause contract).
	Pause bool
}

// ClusterAPIInputs are the inputs of one Cluster API object's decision.
type ClusterAPIInputs struct {
	// Owner is the MachineSet or MachineDeployment as read.
	Owner *unstructured.Unstructured
	// Object is the owner reduced with its template and twin (clusterapi.ObjectOf).
	Object bootimage.Object
	// Template is the infrastructure machine template the owner names, nil when it is not there.
	Template *unstructured.Unstructured
	// Twin is the status.authoritativeAPI of the Machine API MachineSet of the owner's name; nil
	// for a MachineDeployment or without one.
	Twin *machinev1beta1.MachineAuthority
	// Cluster is the owner's Cluster, read only under Pause; nil without one.
	Cluster *unstructured.Unstructured
}

// Owners lists the Cluster API objects of kind (bootimage.KindMachineSet or
// KindMachineDeployment) in openshift-cluster-api; none when the Cluster API is not served.
func (c ClusterAPI) Owners(ctx context.Context, kind string) ([]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(kind + "List"))
	err := c.Reader.List(ctx, list, client.InNamespace(bootimage.ClusterAPINamespace))
	if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Read reads owner's template, its twin and, under Pause, its Cluster.
func (c ClusterAPI) Read(ctx context.Context, owner *unstructured.Unstructured) (ClusterAPIInputs, error) {
	in := ClusterAPIInputs{Owner: owner}
	var err error
	if in.Template, err = capi.Template(ctx, c.Mapper, c.Reader, owner); err != nil {
		return in, err
	}
	if in.Template == nil && c.Live != nil {
		if in.Template, err = capi.Template(ctx, c.Mapper, c.Live, owner); err != nil {
			return in, err
		}
	}
	if in.Twin, err = c.twin(ctx, owner); err != nil {
		return in, err
	}
	if c.Pause {
		if in.Cluster, err = ClusterOf(ctx, c.Reader, owner); err != nil {
			return in, err
		}
	}
	in.Object = clusterapi.ObjectOf(owner, in.Template, in.Twin)
	return in, nil
}

// twin returns the status.authoritativeAPI of the Machine API MachineSet of owner's name, nil for
// a MachineDeployment, when there is none, or when the Machine API is not served.
func (c ClusterAPI) twin(ctx context.Context, owner *unstructured.Unstructured) (*machinev1beta1.MachineAuthority, error) {
	if owner.GetKind() != bootimage.KindMachineSet || c.MachineAPI == nil {
		return nil, nil
	}
	ms := &machinev1beta1.MachineSet{}
	err := c.MachineAPI.Get(ctx, client.ObjectKey{Namespace: kube.MachineAPINamespace, Name: owner.GetName()}, ms)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &ms.Status.AuthoritativeAPI, nil
}

// ClusterOf returns the Cluster owner belongs to, read through r; nil when it names none, it is
// not found or Clusters are not served.
func ClusterOf(ctx context.Context, r client.Reader, owner *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name := clusterapi.ClusterName(owner)
	if name == "" {
		return nil, nil
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(clusterapi.GroupVersion.WithKind("Cluster"))
	err := r.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, cluster)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return nil, nil
	}
	return cluster, err
}
