package aws

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// The installer's per-install AMI copy (openshift/installer pkg/asset/rhcos): when the install
// region has no AMI in the stream, it copies the stream's us-east-1 AMI into the region, tags the
// copy with these tags, and points the machines at it by a tag:Name filter.
const (
	// CopySourceRegion is where every copy is made from, as the installer does.
	CopySourceRegion = "us-east-1"
	// TagName holds <infraID>-ami-<region> on the installer's copy.
	TagName = "Name"
	// TagSourceAMI and TagSourceRegion name the AMI a copy was made from.
	TagSourceAMI    = "sourceAMI"
	TagSourceRegion = "sourceRegion"
	// TagCopiedBy marks the copies this operator made; TagRHCOSVersion and TagOSStream say of
	// what.
	TagCopiedBy     = "bootimage.openshift.io/copied-by"
	TagRHCOSVersion = "bootimage.openshift.io/rhcos-version"
	TagOSStream     = "bootimage.openshift.io/os-stream"
	copiedByValue   = "bootimage-operator"
)

// CopyCredentialsSecret is the Secret of openshift-machine-api the copies are made with: the one
// the operator's CredentialsRequest asks for. The Machine API's credentials, which the lookups
// borrow as the MCO does, cannot copy.
const CopyCredentialsSecret = "bootimage-operator-aws-credentials"

// CredentialsRequest names the operator's CredentialsRequest, in messages asking for its rights.
const CredentialsRequest = "openshift-cloud-credential-operator/bootimage-operator-aws"

// CopyActions are the IAM actions a copy needs, all that CredentialsRequest grants: CopyImage, tags
// given with it, and the default EBS key's KMS use for the encrypted copy (CreateGrant for AWS
// resources only).
var CopyActions = []string{
	"ec2:CopyImage", "ec2:CreateTags",
	"kms:CreateGrant", "kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*",
}

// CopyDeadline is how long a copy may stay pending before it is an Error.
const CopyDeadline = 2 * time.Hour

// OwnedTag is the tag the installer puts on everything of cluster infraID, which `openshift-install
// destroy cluster` deletes.
func OwnedTag(infraID string) string { return "kubernetes.io/cluster/" + infraID }

// InstallerCopyName is the Name tag of the installer's copy in region.
func InstallerCopyName(infraID, region string) string { return infraID + "-ami-" + region }

// Copy is what an update must do in EC2 before the object is patched: copy SourceAMI of
// SourceRegion into Region, or wait for that copy, ImageID, to become available.
type Copy struct {
	Region, SourceRegion, SourceAMI string
	// Arch, Release and OSStream are what the copy holds: the stream's.
	Arch, Release, OSStream string
	// Name and Description of the new image.
	Name, Description string
	// Tags are put on the image and its snapshots as the copy is made.
	Tags map[string]string
	// ClientToken makes the copy idempotent: EC2 answers a second CopyImage of one token with the
	// first one's image.
	ClientToken string
	// ImageID is the copy under way, "" when none is made yet; Started is when it began.
	ImageID string
	Started time.Time
}

// Key identifies the copy: one per source AMI and region.
func (c Copy) Key() string { return c.Region + "|" + c.SourceAMI }

// Copier makes AMI copies: bootimage/cloud/awscloud implements it with EC2 CopyImage.
type Copier interface {
	// Copy starts c and returns the new image's id; a Copy of the same c returns the same image.
	Copy(ctx context.Context, c Copy) (string, error)
}

// CopyOf returns the copy d asks for before its patch; nil when none.
func CopyOf(d bootimage.Decision) *Copy {
	c, _ := d.Prepare.(*Copy)
	return c
}

// standardPartition reports whether region is in the standard aws partition, the only one the
// installer copies in: GovCloud, China, the ISO and EU sovereign regions need an explicit AMI.
func standardPartition(region string) bool {
	for _, prefix := range []string{"us-gov-", "cn-", "us-iso", "eusc-"} {
		if strings.HasPrefix(region, prefix) {
			return false
		}
	}
	return true
}

// installerFilter reports whether filters are the installer's: one tag:Name filter whose one value
// is this cluster's copy in region.
func installerFilter(filters []amiFilter, infraID, region string) bool {
	return infraID != "" && len(filters) == 1 && filters[0].Name == "tag:"+TagName && slices.Equal(filters[0].Values, []string{InstallerCopyName(infraID, region)})
}

type amiFilter struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// isClusterCopy reports whether img is a copy made for cluster infraID, by the installer or this
// operator: owned by the cluster and naming its source.
func isClusterCopy(img Image, infraID string) bool {
	return infraID != "" && img.Tags[OwnedTag(infraID)] == "owned" && img.Tags[TagSourceAMI] != "" && img.Tags[TagSourceRegion] != ""
}

// newestFirst sorts images by CreationDate, newest first, as the Machine API provider picks
// among the images a filter matches (RFC 3339 dates sort as strings).
func newestFirst(images []Image) {
	slices.SortStableFunc(images, func(a, b Image) int { return strings.Compare(b.CreationDate, a.CreationDate) })
}

// decideCopy decides for an object on this cluster's AMI copy in region, described by current
// (a readable form of what the object names now) and source (the AMI its copy was made from, ""
// when unknown). Where the stream has an AMI of the region the object moves to it; elsewhere to
// an available copy of the stream's us-east-1 AMI, made when there is none.
func decideCopy(ctx context.Context, d bootimage.Decision, in bootimage.PlatformInput, region, source string) (bootimage.Decision, error) {
	if target, release, ok := streamAMI(in, region); ok {
		// The stream gained the region: the object boots its AMI by id, as any standard AMI does.
		return toStreamAMI(ctx, d, in, region, target, release, "AMI %s is this cluster's copy of %s; the stream now has %s in %s", d.Current, sourceOrUnknown(source), target, region)
	}
	if !standardPartition(region) {
		return d.With(bootimage.Skip, bootimage.ReasonRegionNotInStream, "the %s stream has no %s AMI for region %s, and AMIs are copied only within the standard aws partition: set ami.id to an RHCOS AMI of %s", in.OSStream, in.Arch, region, region), nil
	}
	src, release, ok := streamAMI(in, CopySourceRegion)
	if !ok {
		return d.With(bootimage.Skip, bootimage.ReasonRegionNotInStream, "the %s stream has no %s AMI for region %s nor for %s, where copies are made from", in.OSStream, in.Arch, region, CopySourceRegion), nil
	}
	d.BootImageVersion = release
	if source == src {
		d.Target = d.Current
		return d.With(bootimage.NoChange, bootimage.ReasonUpToDate, "AMI %s is this cluster's copy of %s, the stream's %s AMI", d.Current, src, CopySourceRegion), nil
	}
	infraID := in.Cluster.InfrastructureName
	catalog := images(in.Cluster)
	if catalog == nil {
		return d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "AMI %s is this cluster's copy of %s; no EC2 image catalogue, so its copies cannot be looked up", d.Current, sourceOrUnknown(source)), nil
	}
	copies, err := catalog.Tagged(ctx, region, map[string]string{OwnedTag(infraID): "owned", TagSourceAMI: src})
	if errors.Is(err, bootimage.ErrNoCatalog) {
		return d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "AMI %s is this cluster's copy of %s; no EC2 credentials, so its copies cannot be looked up", d.Current, sourceOrUnknown(source)), nil
	}
	if err != nil {
		return d, fmt.Errorf("looking up copies of %s in %s: %w", src, region, err)
	}
	newestFirst(copies)
	var failed []Image
	for _, c := range copies {
		switch c.State {
		case "available":
			d.Target = c.ImageID
			d.ProviderSpecPatch = []bootimage.PatchOp{bootimage.Set("/ami", map[string]string{"id": c.ImageID})}
			return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "AMI %s is this cluster's copy of %s; %s is a copy of the stream's %s AMI %s (RHCOS %s)", d.Current, sourceOrUnknown(source), c.ImageID, CopySourceRegion, src, release), nil
		case "pending":
			cp := newCopy(in, region, src, release, len(failed))
			cp.ImageID = c.ImageID
			cp.Started, _ = time.Parse(time.RFC3339, c.CreationDate)
			d.Target, d.Prepare = c.ImageID, cp
			return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "AMI %s is this cluster's copy of %s; %s, a copy of the stream's %s AMI %s (RHCOS %s), is pending: machines boot it once it is available", d.Current, sourceOrUnknown(source), c.ImageID, CopySourceRegion, src, release), nil
		default:
			failed = append(failed, c)
		}
	}
	if len(failed) > 0 {
		f := failed[0]
		return d.With(bootimage.Error, bootimage.ReasonCopyFailed, "copy %s of %s into %s is %s%s: deregister it (aws ec2 deregister-image --region %s --image-id %s) and a new copy is made", f.ImageID, src, region, f.State, stateReason(f), region, f.ImageID), nil
	}
	cp := newCopy(in, region, src, release, 0)
	d.Target, d.Prepare = "copy of "+src, cp
	return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "AMI %s is this cluster's copy of %s; the stream has no %s AMI in %s: copying its %s AMI %s (RHCOS %s) there, as the installer does, and machines boot the copy once it is available", d.Current, sourceOrUnknown(source), in.Arch, region, CopySourceRegion, src, release), nil
}

// toStreamAMI moves d to the stream's AMI of region, by id.
func toStreamAMI(ctx context.Context, d bootimage.Decision, in bootimage.PlatformInput, region, target, release, format string, args ...any) (bootimage.Decision, error) {
	d.BootImageVersion = release
	return toTarget(ctx, d, in, region, target, bootimage.Set("/ami", map[string]string{"id": target}), format, args...)
}

func sourceOrUnknown(source string) string {
	if source == "" {
		return "an unknown AMI"
	}
	return source
}

func stateReason(img Image) string {
	if img.StateReason == "" {
		return ""
	}
	return " (" + img.StateReason + ")"
}

// newCopy is the copy of src into region for the object's stream and arch. attempt counts the
// failed copies seen: each makes a new client token, so a new copy follows a failed one.
func newCopy(in bootimage.PlatformInput, region, src, release string, attempt int) *Copy {
	infraID := in.Cluster.InfrastructureName
	tags := map[string]string{}
	if infra := in.Cluster.Infrastructure; infra != nil && infra.Status.PlatformStatus != nil && infra.Status.PlatformStatus.AWS != nil {
		for _, t := range infra.Status.PlatformStatus.AWS.ResourceTags {
			tags[t.Key] = t.Value
		}
	}
	// Not the installer's Name: an image of that Name would change what every object sharing the
	// installer's filter boots, selected or not, of any architecture.
	tags[TagName] = fmt.Sprintf("%s-ami-%s-%s", infraID, region, release)
	tags[OwnedTag(infraID)] = "owned"
	tags[TagSourceAMI], tags[TagSourceRegion] = src, CopySourceRegion
	tags[TagCopiedBy], tags[TagRHCOSVersion], tags[TagOSStream] = copiedByValue, release, in.OSStream
	token := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%s|%d", infraID, region, src, attempt)))
	return &Copy{
		Region: region, SourceRegion: CopySourceRegion, SourceAMI: src,
		Arch: in.Arch, Release: release, OSStream: in.OSStream,
		Name:        fmt.Sprintf("%s-rhcos-%s-%s", infraID, release, in.Arch),
		Description: fmt.Sprintf("RHCOS %s (%s) copied from %s %s by the bootimage-operator for cluster %s", release, in.Arch, CopySourceRegion, src, infraID),
		Tags:        tags, ClientToken: fmt.Sprintf("bootimage-%x", token[:16]),
	}
}

// CopyOverdue returns the Error a copy still pending at now becomes after CopyDeadline; ok is false
// while it has time.
func CopyOverdue(d bootimage.Decision, now time.Time) (bootimage.Decision, bool) {
	c := CopyOf(d)
	if c == nil || c.ImageID == "" || c.Started.IsZero() || now.Sub(c.Started) < CopyDeadline {
		return d, false
	}
	d.Prepare, d.ProviderSpecPatch = nil, nil
	return d.With(bootimage.Error, bootimage.ReasonCopyFailed, "copy %s of %s into %s has been pending since %s, more than %s: new machines keep booting %s; deregister it and a new copy is made", c.ImageID, c.SourceAMI, c.Region, c.Started.UTC().Format(time.RFC3339), CopyDeadline, d.Current), true
}

// Refusals of CopyImage that more tries will not lift: what the copy lacks, by EC2 error code;
// "" for the actions of the CredentialsRequest.
var copyRefusals = map[string]string{
	"UnauthorizedOperation": "", "AccessDenied": "", "AccessDeniedException": "",
	"AuthFailure": "valid AWS credentials", "SignatureDoesNotMatch": "valid AWS credentials",
	"InvalidClientTokenId": "valid AWS credentials", "UnrecognizedClientException": "valid AWS credentials",
	"KMSKeyNotAccessible":    "the KMS actions on the account's default EBS key",
	"InvalidKMSKey.Disabled": "an enabled default EBS KMS key",
	"ResourceLimitExceeded":  "room under the account's limit of concurrent AMI copies or of AMIs",
	"AMIQuotaExceeded":       "room under the account's AMI quota",
	"OptInRequired":          "a subscription of the account to the source AMI",
	"InvalidAMIID.NotFound":  "a source AMI that exists in " + CopySourceRegion,
	"IncorrectState":         "a source AMI in state available",
	"Blocked":                "an account allowed to copy AMIs",
	"PendingVerification":    "an account verified for EC2",
}

// CopyRefused returns the Skip for d whose copy EC2 refused for good with code; ok is false for a
// failure worth retrying (throttling, an outage).
func CopyRefused(d bootimage.Decision, code, message string) (bootimage.Decision, bool) {
	needs, ok := copyRefusals[code]
	if !ok {
		return d, false
	}
	if needs == "" {
		needs = "the actions " + strings.Join(CopyActions, ", ")
	}
	c := CopyOf(d)
	d.Prepare, d.ProviderSpecPatch = nil, nil
	return d.With(bootimage.Skip, bootimage.ReasonCopyNotPermitted, "EC2 refused to copy %s from %s into %s (%s: %s): the copy needs %s, which CredentialsRequest %s grants through Secret openshift-machine-api/%s; new machines keep booting %s",
		c.SourceAMI, c.SourceRegion, c.Region, code, message, needs, CredentialsRequest, CopyCredentialsSecret, d.Current), true
}

// NoCopyCredentials returns the Skip for d when the copy credentials Secret is missing.
func NoCopyCredentials(d bootimage.Decision) bootimage.Decision {
	c := CopyOf(d)
	d.Prepare, d.ProviderSpecPatch = nil, nil
	return d.With(bootimage.Skip, bootimage.ReasonCopyNotPermitted, "copying %s from %s into %s needs ec2:CopyImage and ec2:CreateTags, which the Machine API's credentials lack: Secret openshift-machine-api/%s of CredentialsRequest %s is missing (on a manual or STS cluster, create it with ccoctl); new machines keep booting %s",
		c.SourceAMI, c.SourceRegion, c.Region, CopyCredentialsSecret, CredentialsRequest, d.Current)
}
