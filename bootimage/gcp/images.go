package gcp

import (
	"context"
	"time"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
)

// Image is what the operator knows of a GCP compute image.
type Image struct {
	Name string
	// Deprecation is the image's deprecation state: "", ACTIVE, DEPRECATED, OBSOLETE or DELETED.
	Deprecation string
}

// Images looks GCP compute images up: bootimage/cloud/gcpcloud implements it with the compute API.
// bootimage.ErrNoCatalog says there are no credentials.
type Images interface {
	// Image returns the image name in project, nil when it does not exist.
	Image(ctx context.Context, project, name string) (*Image, error)
}

// images returns the cluster's image lookups; nil when it has none.
func images(c bootimage.Cluster) Images {
	i, _ := c.Cloud.(Images)
	return i
}

// Settings is how to reach the compute API: the service account of the
// openshift-machine-api/gcp-cloud-credentials Secret.
type Settings struct {
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

// NewImages makes Images reading its settings from settings on each call
// (bootimage.ErrNoCatalog when there are no credentials), its answers kept for ttl and its
// failures remembered as backoff says. gcpcloud.New is one; it is a package of its own so that a
// binary that never runs on GCP does not link the Google SDK.
type NewImages func(settings func(context.Context) (Settings, error), ttl time.Duration, backoff cloud.Backoff, metrics cloud.Observer) Images
