package bootimage

import (
	"context"
	"errors"
)

// AWSImage is what the operator knows of an AMI: the fields of EC2 DescribeImages it reads.
type AWSImage struct {
	ImageID      string `json:"imageId"`
	OwnerID      string `json:"ownerId"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	CreationDate string `json:"creationDate"`
	Region       string `json:"region"`
	State        string `json:"state"`
}

// GCPImage is what the operator knows of a GCP compute image.
type GCPImage struct {
	Name string
	// Deprecation is the image's deprecation state: "", ACTIVE, DEPRECATED, OBSOLETE or DELETED.
	Deprecation string
}

// ErrNoCatalog says a cloud's image catalogue is not available (no credentials): checks that need
// it are skipped, and decisions that cannot be made without it say so.
var ErrNoCatalog = errors.New("no image catalogue")

// Catalog looks up cloud images. Implementations live in bootimage/cloud.
type Catalog interface {
	// AWSImage returns the AMI id in region, nil when it does not exist.
	AWSImage(ctx context.Context, region, id string) (*AWSImage, error)
	// AWSMarketplaceImages returns the AMIs of AWS Marketplace product in region, as EC2
	// DescribeImages lists them for owner aws-marketplace and a name ending with the product id.
	AWSMarketplaceImages(ctx context.Context, region, product string) ([]AWSImage, error)
	// GCPImage returns the image name in project, nil when it does not exist.
	GCPImage(ctx context.Context, project, name string) (*GCPImage, error)
}
