package bootimage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/stream-metadata-go/stream"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// RHCOSGCPImagePrefix is where the RHCOS images the stream lists live. Images elsewhere are custom
// or from the marketplace (project redhat-marketplace-public).
const RHCOSGCPImagePrefix = "projects/rhcos-cloud/global/images"

type gcp struct{}

func (gcp) Traits() PlatformTraits {
	return PlatformTraits{MachineSetGate: featuregates.ManagedBootImages, ControlPlane: true, TemplateKind: "GCPMachineTemplate", InStream: func(a stream.Arch) bool {
		return a.Images.Gcp != nil && a.Images.Gcp.Name != ""
	}}
}

func (gcp) Current(spec MachineSpec) string {
	if spec.Template() {
		var image string
		_ = spec.Field("image", &image)
		return image
	}
	var disks []struct {
		Boot  bool   `json:"boot"`
		Image string `json:"image"`
	}
	if spec.Field("disks", &disks) == nil {
		for _, d := range disks {
			if d.Boot {
				return d.Image
			}
		}
	}
	return ""
}

func (g gcp) Decide(ctx context.Context, d Decision, in PlatformInput) (Decision, error) {
	current, path, decided, ok := g.read(d, in)
	if !ok {
		return decided, nil
	}
	d.Current = current
	if !strings.HasPrefix(current, RHCOSGCPImagePrefix+"/") {
		return d.with(Skip, ReasonCustomImage, "boot image %s is not an RHCOS image (%s/...): custom or marketplace images are left alone", current, RHCOSGCPImagePrefix), nil
	}
	img := in.Stream.Architectures[in.Arch].Images.Gcp
	if img == nil || img.Project == "" || img.Name == "" {
		return d.with(Skip, ReasonArchitectureNotInStream, "the %s stream has no GCP image for %s", in.OSStream, in.Arch), nil
	}
	target := fmt.Sprintf("projects/%s/global/images/%s", img.Project, img.Name)
	d.Target = target
	if target == current {
		return d.with(NoChange, ReasonUpToDate, "boot image %s is the stream's", current), nil
	}
	if in.Cluster.Images != nil {
		found, err := in.Cluster.Images.GCPImage(ctx, img.Project, img.Name)
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
	d.ProviderSpecPatch = []PatchOp{set(path, target)}
	return d.with(Update, ReasonImageOutdated, "boot image %s is outdated: the stream's is %s", current, target), nil
}

// read returns the current boot image and the path of its field: a providerSpec's boot disk, or
// a CAPG template's image (a full projects/<p>/global/images/<n> reference).
func (gcp) read(d Decision, in PlatformInput) (current, path string, _ Decision, ok bool) {
	if in.Spec.Template() {
		var image, family *string
		if err := in.Spec.Field("image", &image); err != nil {
			return "", "", in.Spec.invalid(d, "%v", err), false
		}
		if err := in.Spec.Field("imageFamily", &family); err != nil {
			return "", "", in.Spec.invalid(d, "%v", err), false
		}
		switch {
		case image != nil && *image != "":
			return *image, "/image", d, true
		case family != nil && *family != "":
			d.Current = *family
			return "", "", d.with(Skip, ReasonImageNotByID, "the image is given by imageFamily %s, which follows its family's newest image; left to its owner", *family), false
		}
		return "", "", d.with(Skip, ReasonImageNotByID, "no image or imageFamily: CAPG picks its default image, not an RHCOS one; left to its owner"), false
	}
	var disks []json.RawMessage
	if err := in.Spec.Field("disks", &disks); err != nil {
		return "", "", in.Spec.invalid(d, "%v", err), false
	}
	boot := -1
	var bootDisk rawObject
	for i, raw := range disks {
		var disk rawObject
		var flags struct {
			Boot bool `json:"boot"`
		}
		if err := json.Unmarshal(raw, &disk); err != nil || json.Unmarshal(raw, &flags) != nil || disk == nil {
			return "", "", in.Spec.invalid(d, "disks[%d] is not a disk object", i), false
		}
		if flags.Boot {
			boot, bootDisk = i, disk
			break
		}
	}
	if boot < 0 {
		return "", "", in.Spec.invalid(d, "no disk has boot: true"), false
	}
	if err := bootDisk.field("image", &current); err != nil || current == "" {
		return "", "", in.Spec.invalid(d, "disks[%d].image is missing or not a string", boot), false
	}
	return current, fmt.Sprintf("/disks/%d/image", boot), d, true
}
