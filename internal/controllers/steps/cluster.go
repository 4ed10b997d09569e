package steps

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
)

// ClusterInputs reads, from the cache, everything a decision needs besides the object itself,
// with the loader bootimagectl plan reads a cluster or files with (package inputs).
type ClusterInputs struct {
	Client client.Client
	Gates  featuregates.Reader
	// Clouds look the platforms' images up, vCenter templates included.
	Clouds  bootimage.Clouds
	Streams *inputs.StreamCache
	// Namespace holds the coreos-bootimages ConfigMap.
	Namespace string
}

// loader is the operator's loader: the cache is the whole cluster, and the selection decided by
// is MachineConfiguration's status.
func (in ClusterInputs) loader() inputs.Loader {
	return inputs.Loader{
		Reader: in.Client, Gates: in.Gates, Namespace: in.Namespace,
		Clouds: in.Clouds, Streams: in.Streams,
		Selection: inputs.SelectionStatus, Complete: true, InPlace: true,
	}
}

// ready is false until MachineConfiguration/cluster exists and its status was computed for its
// current generation: deciding earlier would report MachineSets as not selected only because the
// status is not there yet. Its status update triggers the decisions.
func (in ClusterInputs) Load(ctx context.Context) (loaded LoadedInputs, ready bool, err error) {
	l, err := in.loader().Load(ctx)
	if err != nil || !l.InForce {
		return loaded, false, err
	}
	return LoadedInputs{Cluster: l.Cluster, Version: l.Version}, true, nil
}

// LoadedInputs are the inputs of the decisions and their version (inputs.Version).
type LoadedInputs struct {
	Cluster bootimage.Cluster
	Version string
}
