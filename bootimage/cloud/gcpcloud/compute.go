// Package gcpcloud looks GCP compute images up with the compute API for the boot image
// pre-flight check: New, a gcp.NewImages, is what controllers.Options.GCP takes. It is the only
// package that links the Google Cloud SDK: an embedder registers it only when the operator may
// run on GCP.
package gcpcloud

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
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
)

// Answer cache bounds, as the EC2 adapter's.
const (
	maxImageAnswers  = 1024
	defaultImagesTTL = 10 * time.Minute
)

// apiImagesGet is the `api` label of the request metrics.
const apiImagesGet = "compute:images.get"

// New returns Images reading settings on each call; it is a gcp.NewImages.
func New(settings func(context.Context) (gcp.Settings, error), ttl time.Duration, backoff cloud.Backoff, metrics cloud.Observer) gcp.Images {
	return &Images{Settings: settings, TTL: ttl, Backoff: backoff, Metrics: metrics}
}

var _ gcp.NewImages = New

// Images gets compute images for the pre-flight check. Answers are kept for TTL in a bounded
// cache, one request per image at a time; the client is replaced when the settings change and
// closed once the last request using it is done.
type Images struct {
	// Settings returns the current settings; bootimage.ErrNoCatalog when there are no credentials.
	Settings func(context.Context) (gcp.Settings, error)
	// TTL bounds how stale an answer (existence, deprecation) may be; 10 minutes when zero.
	TTL time.Duration
	// Backoff is how long a failed images.get is remembered, per image, or for every image when
	// the API throttles or fails.
	Backoff cloud.Backoff
	// Metrics, when set, count the requests.
	Metrics cloud.Observer

	init    sync.Once
	answers *cloud.Lookups[*gcp.Image]

	mu     sync.Mutex // guards client; held only while swapping it, never across a request
	client *gcpClient
}

// gcpClient is a compute client and the requests in flight on it.
type gcpClient struct {
	key    string
	images *compute.ImagesClient
	users  sync.WaitGroup
}

// GCPImage implements gcp.Images and bootimage.Catalog.
func (g *Images) Image(ctx context.Context, project, name string) (*gcp.Image, error) {
	s, err := g.Settings(ctx)
	if err != nil {
		return nil, err
	}
	g.init.Do(func() { g.answers = cloud.NewFailingLookups[*gcp.Image](maxImageAnswers, g.Backoff) })
	ttl := g.TTL
	if ttl == 0 {
		ttl = defaultImagesTTL
	}
	scope := gcpClientKey(s)
	return g.answers.Get(ctx, scope+"|"+project+"/"+name, scope, ttl, func(ctx context.Context) (*gcp.Image, error) {
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
			cloud.Observe(g.Metrics, apiImagesGet, start, nil)
			return nil, nil
		}
		cloud.Observe(g.Metrics, apiImagesGet, start, err)
		if errors.As(err, &apiErr) {
			var code string
			if len(apiErr.Errors) > 0 {
				code = apiErr.Errors[0].Reason
			}
			return nil, cloud.NewAPIFailure(apiImagesGet, "", err, apiErr.Code, code, apiErr.Message)
		}
		if err != nil {
			return nil, cloud.NewFailure(apiImagesGet, "", err)
		}
		return &gcp.Image{Name: got.GetName(), Deprecation: got.GetDeprecated().GetState()}, nil
	})
}

func gcpClientKey(s gcp.Settings) string { return s.Version + "|" + s.Endpoint }

// acquire returns the client for s, counted as in use until the caller calls users.Done. A client
// replaced by newer settings is closed once its last user is done, never under one.
func (g *Images) acquire(ctx context.Context, s gcp.Settings) (*gcpClient, error) {
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

func newImagesClient(ctx context.Context, s gcp.Settings) (*compute.ImagesClient, error) {
	var opts []option.ClientOption
	switch {
	case s.Token != "":
		opts = append(opts, option.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: s.Token})))
	case len(s.CredentialsJSON) > 0:
		//lint:ignore SA1019 the Secret holds a service account key, or an external account one on workload identity clusters: any type the CCO writes
		opts = append(opts, option.WithCredentialsJSON(s.CredentialsJSON))
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
