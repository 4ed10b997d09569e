// Package aws decides AWS MachineSets' boot images: the AMI of the stream for the region, and
// its lookup interface (Images), which bootimage/cloud/awscloud implements with EC2.
package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
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

// imageFailure: EC2's error codes for an AMI it will not launch: unknown or malformed
// (InvalidAMIID.*), a Marketplace product the account has not subscribed to (OptInRequired), an
// encrypted copy whose KMS key the launch may not use (Client.InvalidKMSKey.*, KMS.*).
var imageFailure = regexp.MustCompile(`InvalidAMIID|OptInRequired|InvalidKMSKey|KMS\.(Disabled|NotFound|AccessDenied)Exception`)

func (platform) Traits() bootimage.PlatformTraits {
	return bootimage.PlatformTraits{Type: configv1.AWSPlatformType, MachineSetGate: featuregates.ManagedBootImagesAWS, ControlPlane: true, TemplateKind: "AWSMachineTemplate", ClusterAPIProvider: "sigs.k8s.io/cluster-api-provider-aws/v2",
		ImageFailure: imageFailure,
		Credentials:  bootimage.Credentials{Secret: CredentialsSecret, Without: "AMIs cannot be looked up in EC2, by the operator either, so RHCOS AMIs show as CustomImage"}, InStream: func(a stream.Arch) bool {
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
		ID      *string     `json:"id"`
		ARN     *string     `json:"arn"`
		Filters []amiFilter `json:"filters"`
	} `json:"ami"`
	Placement struct {
		Region string `json:"region"`
	} `json:"placement"`
	// CAPA's lookup of an AMI by name pattern instead of id.
	ImageLookupFormat string `json:"imageLookupFormat"`
	ImageLookupOrg    string `json:"imageLookupOrg"`
	ImageLookupBaseOS string `json:"imageLookupBaseOS"`
}

// How an object names its AMI, when the operator can read it.
type naming int

const (
	byID naming = iota
	// byInstallerFilter: the installer's tag:Name filter of this cluster's copy in the region.
	byInstallerFilter
	// byNothing: a Cluster API template with no ami.id where the installer copied the AMI
	// (installer#10877: it leaves the worker templates without one).
	byNothing
)

// read returns the current AMI, the region machines launch in (a providerSpec's placement.region;
// for a template, which has none, the cluster's) and how the object names the AMI.
func (platform) read(d bootimage.Decision, in bootimage.PlatformInput) (current, region string, how naming, _ bootimage.Decision, ok bool) {
	var ps awsMachineSpec
	for _, f := range []struct {
		key string
		v   any
	}{{"ami", &ps.AMI}, {"placement", &ps.Placement}, {"imageLookupFormat", &ps.ImageLookupFormat}, {"imageLookupOrg", &ps.ImageLookupOrg}, {"imageLookupBaseOS", &ps.ImageLookupBaseOS}} {
		if err := in.Spec.Field(f.key, f.v); err != nil {
			return "", "", 0, in.Spec.Invalid(d, "%v", err), false
		}
	}
	region = ps.Placement.Region
	if in.Spec.Template() {
		region = clusterRegion(in.Cluster)
	}
	infraID := in.Cluster.InfrastructureName
	_, _, streamHasRegion := streamAMI(in, region)
	switch {
	case region == "" && in.Spec.Template():
		return "", "", 0, d.With(bootimage.Error, bootimage.ReasonInvalidProviderSpec, "the cluster's AWS region is unknown (Infrastructure cluster status.platformStatus.aws.region is empty)"), false
	case region == "":
		return "", "", 0, in.Spec.Invalid(d, "placement.region is empty"), false
	case ps.AMI.ID != nil && *ps.AMI.ID != "":
		return *ps.AMI.ID, region, byID, d, true
	case ps.AMI.ARN == nil && installerFilter(ps.AMI.Filters, infraID, region):
		return "tag:" + TagName + "=" + InstallerCopyName(infraID, region), region, byInstallerFilter, d, true
	case ps.AMI.ARN != nil:
		return "", "", 0, d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "the AMI is given by ARN, not by id; left to its owner"), false
	case len(ps.AMI.Filters) > 0:
		return "", "", 0, d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "the AMI is given by filters other than the installer's (tag:Name %s), not by id; left to its owner", InstallerCopyName(infraID, region)), false
	case ps.ImageLookupFormat != "" || ps.ImageLookupOrg != "" || ps.ImageLookupBaseOS != "":
		return "", "", 0, d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "the AMI is looked up by name (imageLookupFormat, imageLookupOrg, imageLookupBaseOS), not given by id; left to its owner"), false
	case in.Spec.Template() && infraID != "" && !streamHasRegion:
		return "no ami.id", region, byNothing, d, true
	case in.Spec.Template():
		return "", "", 0, d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "no ami.id: CAPA looks an AMI up by its default name pattern, not an RHCOS image; left to its owner"), false
	}
	return "", "", 0, in.Spec.Invalid(d, "ami.id is empty"), false
}

func (a platform) Decide(ctx context.Context, d bootimage.Decision, in bootimage.PlatformInput) (bootimage.Decision, error) {
	current, region, how, decided, ok := a.read(d, in)
	if !ok {
		return decided, nil
	}
	d.Current = current
	if how != byID {
		return decideNotByID(ctx, d, in, region, how)
	}
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
		if isClusterCopy(*img, in.Cluster.InfrastructureName) {
			return decideCopy(ctx, d, in, region, img.Tags[TagSourceAMI])
		}
		return d.With(bootimage.Skip, bootimage.ReasonCustomImage, "AMI %s is owned by account %s, not by RHCOS (%s) or the AWS Marketplace (%s)", current, img.OwnerID, RHCOSOwner, MarketplaceOwner), nil
	}
	if target == current {
		d.Target = target
		return d.With(bootimage.NoChange, bootimage.ReasonUpToDate, "AMI %s is the stream's", current), nil
	}
	return toTarget(ctx, d, in, region, target, bootimage.Set("/ami/id", target), "AMI %s is outdated: the stream's is %s", current, target)
}

// toTarget returns the Update of d to target, with patch, once EC2 says target is available in
// region; until then the Skip that waits for it.
func toTarget(ctx context.Context, d bootimage.Decision, in bootimage.PlatformInput, region, target string, patch bootimage.PatchOp, format string, args ...any) (bootimage.Decision, error) {
	d.Target = target
	t, err := images(in.Cluster).Image(ctx, region, target)
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
	d.ProviderSpecPatch = []bootimage.PatchOp{patch}
	return d.With(bootimage.Update, bootimage.ReasonImageOutdated, format, args...), nil
}

// decideNotByID decides for an object naming the cluster's copy by the installer's filter, or
// none at all: the filter's newest image (the one machines boot) says what it is a copy of.
func decideNotByID(ctx context.Context, d bootimage.Decision, in bootimage.PlatformInput, region string, how naming) (bootimage.Decision, error) {
	catalog := images(in.Cluster)
	if catalog == nil {
		return d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "%s: no EC2 image catalogue, so the installer's AMI copy cannot be checked", d.Current), nil
	}
	if how == byNothing {
		return decideCopy(ctx, d, in, region, "")
	}
	named, err := catalog.Tagged(ctx, region, map[string]string{TagName: InstallerCopyName(in.Cluster.InfrastructureName, region)})
	if errors.Is(err, bootimage.ErrNoCatalog) {
		return d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "%s: no EC2 image catalogue, so the installer's AMI copy cannot be checked", d.Current), nil
	}
	if err != nil {
		return d, fmt.Errorf("looking up the installer's AMI copy %s in %s: %w", d.Current, region, err)
	}
	newestFirst(named)
	source := ""
	if len(named) > 0 {
		d.Current = fmt.Sprintf("%s (%s)", d.Current, named[0].ImageID)
		source = named[0].Tags[TagSourceAMI]
	}
	return decideCopy(ctx, d, in, region, source)
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
