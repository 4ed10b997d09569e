package capireconciler

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
)

// ClusterAPICache is the Cluster API controllers' own cache, of openshift-cluster-api only: the
// owners, their templates, the Machines' and infrastructure machines' metadata and the Clusters
// are read from it, so that a steady state reads nothing from the API server, whatever the
// embedder's cache holds, and no informer lists more than the Role in that namespace allows. Its
// informers start on first read, that is only once the controllers may run.
type ClusterAPICache struct{ cache.Cache }

// GetCache makes the manager start it with its own caches, before any controller.
func (c ClusterAPICache) GetCache() cache.Cache { return c.Cache }

// NewClusterAPICache adds the Cluster API cache to mgr and returns it with a client that reads
// through it, unstructured objects included, and writes to the API server.
func NewClusterAPICache(mgr ctrl.Manager) (ClusterAPICache, client.Client, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{bootimage.ClusterAPINamespace: {}},
		// Nothing reads managedFields from it.
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return ClusterAPICache{}, nil, fmt.Errorf("creating the Cluster API cache: %w", err)
	}
	cached := ClusterAPICache{c}
	if err := mgr.Add(cached); err != nil {
		return ClusterAPICache{}, nil, err
	}
	cl, err := client.New(mgr.GetConfig(), client.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		Cache: &client.CacheOptions{Reader: c, Unstructured: true},
	})
	if err != nil {
		return ClusterAPICache{}, nil, fmt.Errorf("creating the Cluster API client: %w", err)
	}
	return cached, cl, nil
}

// clusterAPIObject returns an empty Cluster API object of kind, for reads.
func clusterAPIObject(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(kind))
	return u
}
