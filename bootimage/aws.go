package bootimage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
)

// AMI owners.
const (
	// RHCOSOwner publishes the standard RHCOS AMIs the stream lists.
	RHCOSOwner = "531415883065"
	// MarketplaceOwner publishes the AWS Marketplace RHCOS AMIs.
	MarketplaceOwner = "679593333241"
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
	// The stream's own AMI is RHCOS whoever is asked: no lookup needed (and none possible offline).
	if target, release, ok := streamAMI(in, region); ok && target == current {
		d.Target, d.BootImageVersion = target, release
		return d.with(NoChange, ReasonUpToDate, "AMI %s is the stream's", current), nil
	}
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
		// As the MCO (describeAMI): an error, since the MachineSet cannot launch machines as it is.
		return d.with(Error, ReasonImageNotFound, "AMI %s does not exist in region %s (EC2 DescribeImages there does not know it), so the MachineSet cannot launch machines: set ami.id to an AMI of %s%s",
			current, region, region, streamHint(in, region)), nil
	}
	var target string
	switch img.OwnerID {
	case RHCOSOwner:
		if in.streams.Default.Architectures[in.arch].Images.Aws == nil {
			return d.with(Skip, ReasonRegionNotInStream, "the stream has no AWS images for %s", in.arch), nil
		}
		t, release, ok := streamAMI(in, region)
		if !ok {
			return d.with(Skip, ReasonRegionNotInStream, "the stream has no %s AMI for region %s", in.arch, region), nil
		}
		target = t
		d.BootImageVersion = release
	case MarketplaceOwner:
		return decideMarketplace(ctx, d, in, region, img)
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

// streamAMI returns the stream's AMI for region and its RHCOS release; ok is false when the
// stream has none there.
func streamAMI(in providerInput, region string) (ami, release string, ok bool) {
	arch := in.streams.Default.Architectures[in.arch]
	if arch.Images.Aws == nil {
		return "", "", false
	}
	ri, found := arch.Images.Aws.Regions[region]
	if !found || ri.Image == "" {
		return "", "", false
	}
	return ri.Image, cmp.Or(ri.Release, arch.Artifacts["aws"].Release), true
}

// streamHint names the stream's AMI for region, when it has one, for a message asking for an AMI.
func streamHint(in providerInput, region string) string {
	if ami, _, ok := streamAMI(in, region); ok {
		return fmt.Sprintf(" (the stream's RHCOS AMI there is %s)", ami)
	}
	return ""
}
