package cloud

import (
	"context"
	"time"

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

// GCPLookup gets GCP compute images. Package cloud/gcp implements it on the compute API; it is
// its own package so that a binary that never runs on GCP does not link the Google SDK.
type GCPLookup interface {
	GCPImage(ctx context.Context, project, name string) (*bootimage.GCPImage, error)
}

// NewGCPLookup makes a GCPLookup reading its settings from settings on each call
// (bootimage.ErrNoCatalog when there are no credentials), its answers kept for ttl and its
// failures remembered as backoff says. gcp.New is one.
type NewGCPLookup func(settings func(context.Context) (GCPSettings, error), ttl time.Duration, backoff Backoff, metrics *Metrics) GCPLookup

// Catalog combines the catalogues of both clouds into one bootimage.Catalog.
type Catalog struct {
	AWS *EC2
	GCP GCPLookup
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
