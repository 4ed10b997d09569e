package bootimage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// RHCOSGCPImagePrefix is where the RHCOS images the stream lists live. Images elsewhere are custom
// or from the marketplace (project redhat-marketplace-public).
const RHCOSGCPImagePrefix = "projects/rhcos-cloud/global/images"

type gcp struct{}

func (gcp) decide(ctx context.Context, d Decision, in providerInput) (Decision, error) {
	var disks []json.RawMessage
	if err := in.spec.field("disks", &disks); err != nil {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: %v", err), nil
	}
	boot := -1
	var bootDisk rawObject
	for i, raw := range disks {
		var disk rawObject
		var flags struct {
			Boot bool `json:"boot"`
		}
		if err := json.Unmarshal(raw, &disk); err != nil || json.Unmarshal(raw, &flags) != nil || disk == nil {
			return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: disks[%d] is not a disk object", i), nil
		}
		if flags.Boot {
			boot, bootDisk = i, disk
			break
		}
	}
	if boot < 0 {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: no disk has boot: true"), nil
	}
	var current string
	if err := bootDisk.field("image", &current); err != nil || current == "" {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: disks[%d].image is missing or not a string", boot), nil
	}
	d.Current = current
	if !strings.HasPrefix(current, RHCOSGCPImagePrefix+"/") {
		return d.with(Skip, ReasonCustomImage, "boot image %s is not an RHCOS image (%s/...): custom or marketplace images are left alone", current, RHCOSGCPImagePrefix), nil
	}
	img := in.streams.Default.Architectures[in.arch].Images.Gcp
	if img == nil || img.Project == "" || img.Name == "" {
		return d.with(Skip, ReasonArchitectureNotInStream, "the stream has no GCP image for %s", in.arch), nil
	}
	target := fmt.Sprintf("projects/%s/global/images/%s", img.Project, img.Name)
	d.Target = target
	if target == current {
		return d.with(NoChange, ReasonUpToDate, "boot image %s is the stream's", current), nil
	}
	if in.images != nil {
		found, err := in.images.GCPImage(ctx, img.Project, img.Name)
		switch {
		case errors.Is(err, ErrNoCatalog):
			// No credentials: the prefix rule alone decides.
		case err != nil:
			return d, fmt.Errorf("getting GCP image %s: %w", target, err)
		case found == nil:
			return d.with(Skip, ReasonTargetImageUnavailable, "target image %s does not exist", target), nil
		case found.Deprecation != "" && found.Deprecation != "ACTIVE":
			return d.with(Skip, ReasonTargetImageUnavailable, "target image %s is %s", target, found.Deprecation), nil
		}
	}
	d.ProviderSpecPatch = []PatchOp{set(fmt.Sprintf("/disks/%d/image", boot), target)}
	return d.with(Update, ReasonImageOutdated, "boot image %s is outdated: the stream's is %s", current, target), nil
}
