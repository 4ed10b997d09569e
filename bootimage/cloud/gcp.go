package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// GCPSettings is how to reach the compute API: the service account of the
// openshift-machine-api/gcp-cloud-credentials Secret.
type GCPSettings struct {
	// Version identifies the credentials (the Secret's resourceVersion).
	Version string
	// CredentialsJSON is the service account key (key service_account.json of the Secret).
	CredentialsJSON []byte
	// Token, when set instead, is a fixed OAuth token (local test endpoints).
	Token string
	// Endpoint overrides the compute endpoint. Only tests set it: Infrastructure has no GCP
	// service endpoints (the field is not part of the config.openshift.io/v1 API).
	Endpoint string
}

// GCPImages gets compute images for the pre-flight check. Answers are kept for TTL in a bounded
// cache, one request per image at a time; the client is replaced when the settings change and
// closed once the last request using it is done.
type GCPImages struct {
	// Settings returns the current settings; bootimage.ErrNoCatalog when there are no credentials.
	Settings func(context.Context) (GCPSettings, error)
	// TTL bounds how stale an answer (existence, deprecation) may be; 10 minutes when zero.
	TTL time.Duration
	// Backoff is how long a failed images.get is remembered, per image, or for every image when
	// the API throttles or fails.
	Backoff Backoff

	init    sync.Once
	answers *lookups[*bootimage.GCPImage]

	mu     sync.Mutex // guards client; held only while swapping it, never across a request
	client *gcpClient
}

// gcpClient is a compute client and the requests in flight on it.
type gcpClient struct {
	key    string
	images *compute.ImagesClient
	users  sync.WaitGroup
}

// GCPImage implements bootimage.Catalog.
func (g *GCPImages) GCPImage(ctx context.Context, project, name string) (*bootimage.GCPImage, error) {
	s, err := g.Settings(ctx)
	if err != nil {
		return nil, err
	}
	g.init.Do(func() {
		g.answers = newLookups[*bootimage.GCPImage](maxImageAnswers)
		g.answers.failures = newFailures(g.Backoff)
	})
	ttl := g.TTL
	if ttl == 0 {
		ttl = defaultImagesTTL
	}
	scope := gcpClientKey(s)
	return g.answers.get(ctx, scope+"|"+project+"/"+name, scope, ttl, func(ctx context.Context) (*bootimage.GCPImage, error) {
		client, err := g.acquire(ctx, s)
		if err != nil {
			return nil, err
		}
		defer client.users.Done()
		start := time.Now()
		// No gax retries: they would resend a 503 until the context ends, per lookup. The
		// failure backoff retries, once for every caller.
		got, err := client.images.Get(ctx, &computepb.GetImageRequest{Project: project, Image: name}, gax.WithRetry(func() gax.Retryer { return nil }))
		var apiErr *googleapi.Error
		if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
			observe(apiImagesGet, start, nil)
			return nil, nil
		}
		observe(apiImagesGet, start, err)
		if err != nil {
			return nil, newFailure(apiImagesGet, "", err)
		}
		return &bootimage.GCPImage{Name: got.GetName(), Deprecation: got.GetDeprecated().GetState()}, nil
	})
}

// AWSImage implements bootimage.Catalog: the compute API knows no AMIs.
func (g *GCPImages) AWSImage(context.Context, string, string) (*bootimage.AWSImage, error) {
	return nil, bootimage.ErrNoCatalog
}

// AWSMarketplaceImages implements bootimage.Catalog.
func (g *GCPImages) AWSMarketplaceImages(context.Context, string, string) ([]bootimage.AWSImage, error) {
	return nil, bootimage.ErrNoCatalog
}

func gcpClientKey(s GCPSettings) string { return s.Version + "|" + s.Endpoint }

// acquire returns the client for s, counted as in use until the caller calls users.Done. A client
// replaced by newer settings is closed once its last user is done, never under one.
func (g *GCPImages) acquire(ctx context.Context, s GCPSettings) (*gcpClient, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.client == nil || g.client.key != gcpClientKey(s) {
		images, err := newImagesClient(ctx, s) // no request: the token is fetched on first use
		if err != nil {
			return nil, err
		}
		if old := g.client; old != nil {
			go func() {
				old.users.Wait()
				_ = old.images.Close()
			}()
		}
		g.client = &gcpClient{key: gcpClientKey(s), images: images}
	}
	g.client.users.Add(1)
	return g.client, nil
}

func newImagesClient(ctx context.Context, s GCPSettings) (*compute.ImagesClient, error) {
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

// AWSMarketplaceImages implements bootimage.Catalog.
func (c Catalog) AWSMarketplaceImages(ctx context.Context, region, product string) ([]bootimage.AWSImage, error) {
	if c.AWS == nil {
		return nil, bootimage.ErrNoCatalog
	}
	return c.AWS.AWSMarketplaceImages(ctx, region, product)
}

// GCPImage implements bootimage.Catalog.
func (c Catalog) GCPImage(ctx context.Context, project, name string) (*bootimage.GCPImage, error) {
	if c.GCP == nil {
		return nil, bootimage.ErrNoCatalog
	}
	return c.GCP.GCPImage(ctx, project, name)
}
