package aws

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// ROSAMarketplaceProduct is the AWS Marketplace product of ROSA Classic workers. Its AMIs are
// followed like those of any other product.
const ROSAMarketplaceProduct = "34850061-abaf-402d-92df-94325c9e947f"

// marketplaceProducts names the Red Hat AWS Marketplace products, for messages. A product not
// listed here is followed all the same.
var marketplaceProducts = map[string]string{
	"59ead7de-2540-4653-a8b0-fa7926d5c845": "OCP x86_64",
	"963b36c3-de6f-48ed-b802-2b38b2a2cdeb": "OKE x86_64",
	"f5da01a6-d046-487c-9072-42fe53b1cad4": "OPP x86_64",
	"abc249f8-7440-45f7-a4b1-c026baff64c1": "OCP arm64",
	"d2d3ebcd-c1ca-43d8-bf0a-530433200f35": "OKE arm64",
	"be6d3e94-c8dc-4a3e-9218-4b449b11f06f": "OPP arm64",
	"962791c7-3ae5-46d1-ba62-c7a5ebac54fd": "OCP EMEA x86_64",
	"7026c8d7-392c-4010-b93c-f93f7bc5495f": "OKE EMEA x86_64",
	"628c9df3-0254-4f91-bc1f-8619d1b8eaa8": "OPP EMEA x86_64",
	ROSAMarketplaceProduct:                 "ROSA",
}

var (
	// A marketplace AMI name ends with its product id, e.g.
	// RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-59ead7de-2540-4653-a8b0-fa7926d5c845.
	productIDAtEnd = regexp.MustCompile(`(?:^|-)([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$`)
)

// MarketplaceProductID returns the product id at the end of a marketplace AMI name, "" when there is none.
func MarketplaceProductID(amiName string) string {
	m := productIDAtEnd.FindStringSubmatch(amiName)
	if m == nil {
		return ""
	}
	return m[1]
}

// marketplaceCandidate is a marketplace AMI with the RHCOS release of its description.
type marketplaceCandidate struct {
	image   Image
	release bootimage.RHCOSRelease
}

// better ranks the higher release first, the newer AMI on a tie.
func (c marketplaceCandidate) better(o marketplaceCandidate) bool {
	if v := c.release.Compare(o.release); v != 0 {
		return v > 0
	}
	return c.image.CreationDate > o.image.CreationDate
}

// decideMarketplace follows the current AMI's AWS Marketplace product: the best AMI of the product
// in the region whose RHCOS major.minor is not above the stream's.
func decideMarketplace(ctx context.Context, d bootimage.Decision, in bootimage.PlatformInput, region string, current *Image) (bootimage.Decision, error) {
	product := MarketplaceProductID(current.Name)
	if product == "" {
		return d.With(bootimage.Skip, bootimage.ReasonCustomImage, "marketplace AMI %s has no product id at the end of its name %q, so there is no product to follow", current.ImageID, current.Name), nil
	}
	label := product
	if name, ok := marketplaceProducts[product]; ok {
		label = fmt.Sprintf("%s (%s)", product, name)
	}
	stream := in.Stream.Architectures[in.Arch].Artifacts["aws"].Release
	target, ok := bootimage.ParseRHCOSRelease(stream)
	if !ok {
		return d.With(bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "the %s stream has no usable %s artifacts.aws.release (%q) to match marketplace AMIs of product %s against", in.OSStream, in.Arch, stream, label), nil
	}
	if target.PreRHELAligned() {
		return d.With(bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "the stream's RHCOS %s predates OCP 4.19: marketplace AMIs of product %s are followed only from OCP 4.19 (RHEL-aligned RHCOS versions)", target.Full, label), nil
	}
	listed, err := images(in.Cluster).MarketplaceImages(ctx, region, product)
	if err != nil {
		return d, fmt.Errorf("listing marketplace AMIs of product %s in %s: %w", product, region, err)
	}
	best, found, preRHELAligned := bestMarketplaceAMI(listed, target)
	if !found {
		if preRHELAligned > 0 && preRHELAligned == len(listed) {
			return d.With(bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "marketplace product %s has only pre-4.19 AMIs (OCP-numbered RHCOS releases such as 418.94) in %s: the boot image stays until an AMI of RHCOS %s or older is published there", label, region, target.Token()), nil
		}
		return d.With(bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "no available marketplace AMI of product %s with RHCOS %s or older in %s (%d listed)", label, target.Token(), region, len(listed)), nil
	}
	fallback := ""
	if best.release.Compare(target) < 0 {
		fallback = fmt.Sprintf("; RHCOS %s is not yet published in %s, so the newest older release is used until it is", target.Token(), region)
	}
	d.Target, d.BootImageVersion, d.Marketplace = best.image.ImageID, best.release.Full, true
	if best.image.ImageID == current.ImageID {
		return d.With(bootimage.NoChange, bootimage.ReasonUpToDate, "AMI %s (RHCOS %s) is the best marketplace AMI of product %s for the stream's RHCOS %s in %s%s",
			current.ImageID, best.release.Full, label, target.Token(), region, fallback), nil
	}
	d.ProviderSpecPatch = []bootimage.PatchOp{bootimage.Set("/ami/id", best.image.ImageID)}
	return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "AMI %s is outdated: the best marketplace AMI of product %s for the stream's RHCOS %s in %s is %s (RHCOS %s)%s",
		current.ImageID, label, target.Token(), region, best.image.ImageID, best.release.Full, fallback), nil
}

// bestMarketplaceAMI picks, among the available AMIs whose description carries an RHCOS release
// not above target, the highest release and on a tie the newest. It also counts the AMIs of the
// pre-4.19 release scheme, which are never picked.
func bestMarketplaceAMI(listed []Image, target bootimage.RHCOSRelease) (best marketplaceCandidate, found bool, preRHELAligned int) {
	var candidates []marketplaceCandidate
	for _, img := range listed {
		rel, ok := bootimage.ParseRHCOSRelease(img.Description)
		switch {
		case ok && rel.PreRHELAligned():
			preRHELAligned++
		case !ok, img.State != "available", rel.Compare(target) > 0:
		default:
			candidates = append(candidates, marketplaceCandidate{img, rel})
		}
	}
	if len(candidates) == 0 {
		return marketplaceCandidate{}, false, preRHELAligned
	}
	return slices.MaxFunc(candidates, func(a, b marketplaceCandidate) int {
		switch {
		case a.better(b):
			return 1
		case b.better(a):
			return -1
		}
		return 0
	}), true, preRHELAligned
}
