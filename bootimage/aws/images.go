package aws

import (
	"context"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Image is what the operator knows of an AMI: the fields of EC2 DescribeImages it reads.
type Image struct {
	ImageID      string `json:"imageId"`
	OwnerID      string `json:"ownerId"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	CreationDate string `json:"creationDate"`
	Region       string `json:"region"`
	State        string `json:"state"`
	// StateReason says why an image failed.
	StateReason string `json:"stateReason,omitempty"`
	// Tags are the image's tags.
	Tags map[string]string `json:"tags,omitempty"`
}

// Images looks AMIs up: bootimage/cloud/awscloud implements it with EC2, and from a file for
// `bootimagectl plan --aws-images`. bootimage.ErrNoCatalog says there are no credentials.
type Images interface {
	// Image returns the AMI id in region, nil when it does not exist.
	Image(ctx context.Context, region, id string) (*Image, error)
	// MarketplaceImages returns the AMIs of AWS Marketplace product in region, as EC2
	// DescribeImages lists them for owner aws-marketplace and a name ending with the product id.
	MarketplaceImages(ctx context.Context, region, product string) ([]Image, error)
	// Tagged returns the account's own AMIs in region that carry every tag of tags, in any
	// state: the installer's copy by its Name, copies of a source AMI. Answers are short-lived,
	// as a copy's state changes.
	Tagged(ctx context.Context, region string, tags map[string]string) ([]Image, error)
}

// images returns the cluster's AMI lookups; nil when it has none.
func images(c bootimage.Cluster) Images {
	i, _ := c.Cloud.(Images)
	return i
}

// clusterRegion is the cluster's AWS region (Infrastructure status.platformStatus.aws.region): where
// Cluster API machines launch, as their templates do not say.
func clusterRegion(c bootimage.Cluster) string {
	if c.Infrastructure == nil || c.Infrastructure.Status.PlatformStatus == nil || c.Infrastructure.Status.PlatformStatus.AWS == nil {
		return ""
	}
	return c.Infrastructure.Status.PlatformStatus.AWS.Region
}
