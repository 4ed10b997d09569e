package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// GCPSettings is how to reach the compute API, as the cluster says: the service account of the
// openshift-machine-api/gcp-cloud-credentials Secret and the compute endpoint of Infrastructure.
type GCPSettings struct {
	// Version identifies the credentials (the Secret's resourceVersion).
	Version string
	// CredentialsJSON is the service account key (key service_account.json of the Secret).
	CredentialsJSON []byte
	// Token, when set instead, is a fixed OAuth token (local test endpoints).
	Token string
	// Endpoint overrides the compute endpoint (Infrastructure status.platformStatus.gcp.serviceEndpoints).
	Endpoint string
}

// GCPImages gets compute images for the pre-flight check.
type GCPImages struct {
	// Settings returns the current settings; bootimage.ErrNoCatalog when there are no credentials.
	Settings func(context.Context) (GCPSettings, error)

	mu     sync.Mutex
	key    string
	client *compute.ImagesClient
}

// GCPImage implements bootimage.Catalog.
func (g *GCPImages) GCPImage(ctx context.Context, project, name string) (*bootimage.GCPImage, error) {
	s, err := g.Settings(ctx)
	if err != nil {
		return nil, err
	}
	// Not cached: it is asked only when an update is due, and the deprecation state may change.
	client, err := g.clientFor(ctx, s)
	if err != nil {
		return nil, err
	}
	got, err := client.Get(ctx, &computepb.GetImageRequest{Project: project, Image: name})
	var apiErr *googleapi.Error
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &bootimage.GCPImage{Name: got.GetName(), Deprecation: got.GetDeprecated().GetState()}, nil
}

// AWSImage implements bootimage.Catalog: the compute API knows no AMIs.
func (g *GCPImages) AWSImage(context.Context, string, string) (*bootimage.AWSImage, error) {
	return nil, bootimage.ErrNoCatalog
}

// AWSImagesByOwner implements bootimage.Catalog.
func (g *GCPImages) AWSImagesByOwner(context.Context, string, string, string) ([]bootimage.AWSImage, error) {
	return nil, bootimage.ErrNoCatalog
}

func (g *GCPImages) clientFor(ctx context.Context, s GCPSettings) (*compute.ImagesClient, error) {
	key := s.Version + "|" + s.Endpoint
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.client != nil && g.key == key {
		return g.client, nil
	}
	var opts []option.ClientOption
	switch {
	case s.Token != "":
		opts = append(opts, option.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: s.Token})))
	case len(s.CredentialsJSON) > 0:
		opts = append(opts, option.WithCredentialsJSON(s.CredentialsJSON)) //nolint:staticcheck // the Secret holds a service account key
	default:
		return nil, bootimage.ErrNoCatalog
	}
	if s.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(s.Endpoint))
	}
	client, err := compute.NewImagesRESTClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating GCP compute client: %w", err)
	}
	if g.client != nil {
		_ = g.client.Close()
	}
	g.client, g.key = client, key
	return client, nil
}

// Catalog combines the catalogues of both clouds into one bootimage.Catalog.
type Catalog struct {
	AWS *EC2
	GCP *GCPImages
}

// AWSImage implements bootimage.Catalog.
func (c Catalog) AWSImage(ctx context.Context, region, id string) (*bootimage.AWSImage, error) {
	if c.AWS == nil {
		return nil, bootimage.ErrNoCatalog
	}
	return c.AWS.AWSImage(ctx, region, id)
}

// AWSImagesByOwner implements bootimage.Catalog.
func (c Catalog) AWSImagesByOwner(ctx context.Context, region, owner, nameContains string) ([]bootimage.AWSImage, error) {
	if c.AWS == nil {
		return nil, bootimage.ErrNoCatalog
	}
	return c.AWS.AWSImagesByOwner(ctx, region, owner, nameContains)
}

// GCPImage implements bootimage.Catalog.
func (c Catalog) GCPImage(ctx context.Context, project, name string) (*bootimage.GCPImage, error) {
	if c.GCP == nil {
		return nil, bootimage.ErrNoCatalog
	}
	return c.GCP.GCPImage(ctx, project, name)
}
