package bootimage

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/util/version"
)

// AMI owners.
const (
	// RHCOSOwner publishes the standard RHCOS AMIs the stream lists.
	RHCOSOwner = "531415883065"
	// MarketplaceOwner publishes the AWS Marketplace RHCOS AMIs.
	MarketplaceOwner = "679593333241"
)

// Marketplace AMI names end with the product id (a UUID) and carry the OCP version, for example
// "rhcos-x86_64-4.16.3-...-3a2ff8a2-1c1e-4f5d-8f83-4a4c32b1e0a7".
var (
	marketplaceProduct = regexp.MustCompile(`([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)
	ocpVersionInName   = regexp.MustCompile(`\b4\.(\d+)`)
)

type aws struct{}

type awsProviderSpec struct {
	AMI struct {
		ID      *string `json:"id"`
		ARN     *string `json:"arn"`
		Filters []any   `json:"filters"`
	} `json:"ami"`
	Placement struct {
		Region string `json:"region"`
	} `json:"placement"`
}

func (aws) decide(ctx context.Context, d Decision, in providerInput) (Decision, error) {
	var ps awsProviderSpec
	if err := in.spec.field("ami", &ps.AMI); err != nil {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: %v", err), nil
	}
	if err := in.spec.field("placement", &ps.Placement); err != nil {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: %v", err), nil
	}
	region := ps.Placement.Region
	if region == "" {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: placement.region is empty"), nil
	}
	if ps.AMI.ID == nil || *ps.AMI.ID == "" {
		if ps.AMI.ARN != nil || len(ps.AMI.Filters) > 0 {
			return d.with(Skip, ReasonImageNotByID, "the AMI is given by ARN or filters, not by id; left to its owner"), nil
		}
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: ami.id is empty"), nil
	}
	current := *ps.AMI.ID
	d.Current = current
	if in.images == nil {
		return d.with(Skip, ReasonCustomImage, "AMI %s: no EC2 image catalogue, so its owner (RHCOS or custom) cannot be checked", current), nil
	}
	img, err := in.images.AWSImage(ctx, region, current)
	if errors.Is(err, ErrNoCatalog) {
		return d.with(Skip, ReasonCustomImage, "AMI %s: no EC2 image catalogue, so its owner (RHCOS or custom) cannot be checked", current), nil
	}
	if err != nil {
		return d, fmt.Errorf("describing AMI %s in %s: %w", current, region, err)
	}
	if img == nil {
		return d.with(Skip, ReasonCustomImage, "AMI %s not found in %s, so it cannot be recognised as RHCOS", current, region), nil
	}
	var target string
	switch img.OwnerID {
	case RHCOSOwner:
		aws := in.streams.Default.Architectures[in.arch].Images.Aws
		if aws == nil {
			return d.with(Skip, ReasonRegionNotInStream, "the stream has no AWS images for %s", in.arch), nil
		}
		ri, ok := aws.Regions[region]
		if !ok || ri.Image == "" {
			return d.with(Skip, ReasonRegionNotInStream, "the stream has no %s AMI for region %s", in.arch, region), nil
		}
		target = ri.Image
	case MarketplaceOwner:
		t, msg, err := marketplaceTarget(ctx, in, region, img)
		if err != nil {
			return d, err
		}
		if t == "" {
			return d.with(Skip, ReasonTargetImageUnavailable, "%s", msg), nil
		}
		target = t
	default:
		return d.with(Skip, ReasonCustomImage, "AMI %s is owned by account %s, not by RHCOS (%s) or the AWS Marketplace (%s)", current, img.OwnerID, RHCOSOwner, MarketplaceOwner), nil
	}
	d.Target = target
	if target == current {
		return d.with(NoChange, ReasonUpToDate, "AMI %s is the stream's", current), nil
	}
	t, err := in.images.AWSImage(ctx, region, target)
	if err != nil && !errors.Is(err, ErrNoCatalog) {
		return d, fmt.Errorf("describing target AMI %s in %s: %w", target, region, err)
	}
	if t == nil || t.State != "available" {
		state := "not found"
		if t != nil {
			state = "in state " + t.State
		}
		return d.with(Skip, ReasonTargetImageUnavailable, "target AMI %s is %s in %s", target, state, region), nil
	}
	d.ProviderSpecPatch = []PatchOp{set("/ami/id", target)}
	return d.with(Update, ReasonImageOutdated, "AMI %s is outdated: the stream's is %s", current, target), nil
}

// marketplaceTarget returns the newest marketplace AMI of the current AMI's product whose OCP
// version is not newer than the stream's release, or "" and why there is none.
func marketplaceTarget(ctx context.Context, in providerInput, region string, current *AWSImage) (string, string, error) {
	product := marketplaceProduct.FindString(current.Name)
	if product == "" {
		return "", fmt.Sprintf("marketplace AMI %s: no product id in its name %q", current.ImageID, current.Name), nil
	}
	limit, err := version.ParseGeneric(in.streams.ReleaseVersion)
	if err != nil {
		return "", fmt.Sprintf("marketplace AMI %s: coreos-bootimages has no usable releaseVersion (%q)", current.ImageID, in.streams.ReleaseVersion), nil
	}
	candidates, err := in.images.AWSImagesByOwner(ctx, region, MarketplaceOwner, product)
	if err != nil {
		return "", "", fmt.Errorf("listing marketplace AMIs of product %s in %s: %w", product, region, err)
	}
	var usable []AWSImage
	for _, c := range candidates {
		m := ocpVersionInName.FindStringSubmatch(c.Name)
		if m == nil || c.State != "available" {
			continue
		}
		if minor, err := strconv.Atoi(m[1]); err == nil && limit.Major() == 4 && uint(minor) <= limit.Minor() {
			usable = append(usable, c)
		}
	}
	if len(usable) == 0 {
		return "", fmt.Sprintf("no available marketplace AMI of product %s for OCP %d.%d or older in %s", product, limit.Major(), limit.Minor(), region), nil
	}
	sort.Slice(usable, func(i, j int) bool { return usable[i].CreationDate > usable[j].CreationDate })
	return usable[0].ImageID, "", nil
}
