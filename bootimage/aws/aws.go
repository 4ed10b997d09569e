// Package aws decides AWS MachineSets' boot images: the AMI of the stream for the region, and
// its lookup interface (Images), which bootimage/cloud/awscloud implements with EC2.
package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// CredentialsSecret is the Secret of openshift-machine-api the EC2 lookups read, as the MCO's.
const CredentialsSecret = "aws-cloud-credentials"

// AMI owners.
const (
	// RHCOSOwner publishes the standard RHCOS AMIs the stream lists.
	RHCOSOwner = "531415883065"
	// MarketplaceOwner publishes the AWS Marketplace RHCOS AMIs.
	MarketplaceOwner = "679593333241"
)

// platform decides the boot images of aws machines.
type platform struct{}

func init() { bootimage.Register(platform{}) }

func (platform) Traits() bootimage.PlatformTraits {
	return bootimage.PlatformTraits{Type: configv1.AWSPlatformType, MachineSetGate: featuregates.ManagedBootImagesAWS, ControlPlane: true, TemplateKind: "AWSMachineTemplate", ClusterAPIProvider: "sigs.k8s.io/cluster-api-provider-aws/v2",
		Credentials: bootimage.Credentials{Secret: CredentialsSecret, Without: "AMIs cannot be looked up in EC2, by the operator either, so RHCOS AMIs show as CustomImage"}, InStream: func(a stream.Arch) bool {
			return a.Images.Aws != nil && len(a.Images.Aws.Regions) > 0
		}}
}

func (platform) Current(spec bootimage.MachineSpec) string {
	var ami struct {
		ID  string `json:"id"`
		ARN string `json:"arn"`
	}
	if spec.Field("ami", &ami) != nil {
		return ""
	}
	return cmp.Or(ami.ID, ami.ARN)
}

// awsMachineSpec is what the operator reads of an AWSMachineProviderConfig or of a CAPA
// AWSMachineTemplate's spec.template.spec: both name the AMI at ami.id.
type awsMachineSpec struct {
	AMI struct {
		ID      *string `json:"id"`
		ARN     *string `json:"arn"`
		Filters []any   `json:"filters"`
	} `json:"ami"`
	Placement struct {
		Region string `json:"region"`
	} `json:"placement"`
	// CAPA's lookup of an AMI by name pattern instead of id.
	ImageLookupFormat string `json:"imageLookupFormat"`
	ImageLookupOrg    string `json:"imageLookupOrg"`
	ImageLookupBaseOS string `json:"imageLookupBaseOS"`
}

// read returns the current AMI and the region machines launch in: a providerSpec's
// placement.region; for a template, which has none, the cluster's.
func (platform) read(d bootimage.Decision, in bootimage.PlatformInput) (current, region string, _ bootimage.Decision, ok bool) {
	var ps awsMachineSpec
	for _, f := range []struct {
		key string
		v   any
	}{{"ami", &ps.AMI}, {"placement", &ps.Placement}, {"imageLookupFormat", &ps.ImageLookupFormat}, {"imageLookupOrg", &ps.ImageLookupOrg}, {"imageLookupBaseOS", &ps.ImageLookupBaseOS}} {
		if err := in.Spec.Field(f.key, f.v); err != nil {
			return "", "", in.Spec.Invalid(d, "%v", err), false
		}
	}
	region = ps.Placement.Region
	if in.Spec.Template() {
		region = clusterRegion(in.Cluster)
	}
	switch {
	case region == "" && in.Spec.Template():
		return "", "", d.With(bootimage.Error, bootimage.ReasonInvalidProviderSpec, "the cluster's AWS region is unknown (Infrastructure cluster status.platformStatus.aws.region is empty)"), false
	case region == "":
		return "", "", in.Spec.Invalid(d, "placement.region is empty"), false
	case ps.AMI.ID != nil && *ps.AMI.ID != "":
		return *ps.AMI.ID, region, d, true
	case ps.AMI.ARN != nil || len(ps.AMI.Filters) > 0:
		return "", "", d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "the AMI is given by ARN or filters, not by id; left to its owner"), false
	case ps.ImageLookupFormat != "" || ps.ImageLookupOrg != "" || ps.ImageLookupBaseOS != "":
		return "", "", d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "the AMI is looked up by name (imageLookupFormat, imageLookupOrg, imageLookupBaseOS), not given by id; left to its owner"), false
	case in.Spec.Template():
		return "", "", d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "no ami.id: CAPA looks an AMI up by its default name pattern, not an RHCOS image; left to its owner"), false
	}
	return "", "", in.Spec.Invalid(d, "ami.id is empty"), false
}

func (a platform) Decide(ctx context.Context, d bootimage.Decision, in bootimage.PlatformInput) (bootimage.Decision, error) {
	current, region, decided, ok := a.read(d, in)
	if !ok {
		return decided, nil
	}
	d.Current = current
	// The stream's own AMI is RHCOS whoever is asked: no lookup needed (and none possible offline).
	if target, release, ok := streamAMI(in, region); ok && target == current {
		d.Target, d.BootImageVersion = target, release
		return d.With(bootimage.NoChange, bootimage.ReasonUpToDate, "AMI %s is the stream's", current), nil
	}
	catalog := images(in.Cluster)
	if catalog == nil {
		return d.With(bootimage.Skip, bootimage.ReasonCustomImage, "AMI %s: no EC2 image catalogue, so its owner (RHCOS or custom) cannot be checked", current), nil
	}
	img, err := catalog.Image(ctx, region, current)
	if errors.Is(err, bootimage.ErrNoCatalog) {
		return d.With(bootimage.Skip, bootimage.ReasonCustomImage, "AMI %s: no EC2 image catalogue, so its owner (RHCOS or custom) cannot be checked", current), nil
	}
	if err != nil {
		return d, fmt.Errorf("describing AMI %s in %s: %w", current, region, err)
	}
	if img == nil {
		// As the MCO (describeAMI): an error, since the MachineSet cannot launch machines as it is.
		return d.With(bootimage.Error, bootimage.ReasonImageNotFound, "AMI %s does not exist in region %s (EC2 DescribeImages there does not know it), so the MachineSet cannot launch machines: set ami.id to an AMI of %s%s",
			current, region, region, streamHint(in, region)), nil
	}
	var target string
	switch img.OwnerID {
	case RHCOSOwner:
		if in.Stream.Architectures[in.Arch].Images.Aws == nil {
			return d.With(bootimage.Skip, bootimage.ReasonRegionNotInStream, "the %s stream has no AWS images for %s", in.OSStream, in.Arch), nil
		}
		t, release, ok := streamAMI(in, region)
		if !ok {
			return d.With(bootimage.Skip, bootimage.ReasonRegionNotInStream, "the %s stream has no %s AMI for region %s (it has AMIs in %s)", in.OSStream, in.Arch, region, streamRegions(in)), nil
		}
		target = t
		d.BootImageVersion = release
	case MarketplaceOwner:
		return decideMarketplace(ctx, d, in, region, img)
	default:
		return d.With(bootimage.Skip, bootimage.ReasonCustomImage, "AMI %s is owned by account %s, not by RHCOS (%s) or the AWS Marketplace (%s)", current, img.OwnerID, RHCOSOwner, MarketplaceOwner), nil
	}
	d.Target = target
	if target == current {
		return d.With(bootimage.NoChange, bootimage.ReasonUpToDate, "AMI %s is the stream's", current), nil
	}
	t, err := catalog.Image(ctx, region, target)
	if err != nil && !errors.Is(err, bootimage.ErrNoCatalog) {
		return d, fmt.Errorf("describing target AMI %s in %s: %w", target, region, err)
	}
	if t == nil || t.State != "available" {
		state := "not found"
		if t != nil {
			state = "in state " + t.State
		}
		return d.With(bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "target AMI %s is %s in %s", target, state, region), nil
	}
	d.ProviderSpecPatch = []bootimage.PatchOp{bootimage.Set("/ami/id", target)}
	return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "AMI %s is outdated: the stream's is %s", current, target), nil
}

// streamAMI returns the stream's AMI for region and its RHCOS release; ok is false when the
// stream has none there.
func streamAMI(in bootimage.PlatformInput, region string) (ami, release string, ok bool) {
	arch := in.Stream.Architectures[in.Arch]
	if arch.Images.Aws == nil {
		return "", "", false
	}
	ri, found := arch.Images.Aws.Regions[region]
	if !found || ri.Image == "" {
		return "", "", false
	}
	return ri.Image, cmp.Or(ri.Release, arch.Artifacts["aws"].Release), true
}

// streamRegions lists the regions the stream has AMIs in.
func streamRegions(in bootimage.PlatformInput) string {
	var regions []string
	for region, ri := range in.Stream.Architectures[in.Arch].Images.Aws.Regions {
		if ri.Image != "" {
			regions = append(regions, region)
		}
	}
	if len(regions) == 0 {
		return "no region"
	}
	slices.Sort(regions)
	return strings.Join(regions, ", ")
}

// streamHint names the stream's AMI for region, when it has one, for a message asking for an AMI.
func streamHint(in bootimage.PlatformInput, region string) string {
	if ami, _, ok := streamAMI(in, region); ok {
		return fmt.Sprintf(" (the stream's RHCOS AMI there is %s)", ami)
	}
	return ""
}
