// Package gcp decides GCP MachineSets' boot images: the image of the stream, and its lookup
// interface (Images, Settings, NewImages), which bootimage/cloud/gcpcloud implements with the
// compute API. The type of controllers.Options.GCP is NewImages, whose one implementation is
// gcpcloud.New: a package of its own, so no package here links the Google Cloud SDK.
package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// RHCOSGCPImagePrefix is where the RHCOS images the stream lists live. Images elsewhere are custom
// or from the marketplace (project redhat-marketplace-public).
const RHCOSGCPImagePrefix = "projects/rhcos-cloud/global/images"

// CredentialsSecret is the Secret of openshift-machine-api the compute lookups read, as the MCO's.
const CredentialsSecret = "gcp-cloud-credentials"

// platform decides the boot images of gcp machines.
type platform struct{}

func init() { bootimage.Register(platform{}) }

// imageFailure: Compute Engine's answers for a boot disk image it will not use: one not found,
// an invalid sourceImage, or no right to read it (compute.images.useReadOnly).
var imageFailure = regexp.MustCompile(`sourceImage|compute\.images\.useReadOnly|/images/[^ ]+' was not found`)

func (platform) Traits() bootimage.PlatformTraits {
	return bootimage.PlatformTraits{Type: configv1.GCPPlatformType, MachineSetGate: featuregates.ManagedBootImages, ControlPlane: true, TemplateKind: "GCPMachineTemplate", ClusterAPIProvider: "sigs.k8s.io/cluster-api-provider-gcp",
		ImageFailure: imageFailure,
		Credentials:  bootimage.Credentials{Secret: CredentialsSecret, Without: "target images are not pre-flight checked, by the operator either"}, InStream: func(a stream.Arch) bool {
			return a.Images.Gcp != nil && a.Images.Gcp.Name != ""
		}}
}

func (platform) Current(spec bootimage.MachineSpec) string {
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

func (g platform) Decide(ctx context.Context, d bootimage.Decision, in bootimage.PlatformInput) (bootimage.Decision, error) {
	current, path, decided, ok := g.read(d, in)
	if !ok {
		return decided, nil
	}
	d.Current = current
	if !strings.HasPrefix(current, RHCOSGCPImagePrefix+"/") {
		return d.With(bootimage.Skip, bootimage.ReasonCustomImage, "boot image %s is not an RHCOS image (%s/...): custom or marketplace images are left alone", current, RHCOSGCPImagePrefix), nil
	}
	img := in.Stream.Architectures[in.Arch].Images.Gcp
	if img == nil || img.Project == "" || img.Name == "" {
		return d.With(bootimage.Skip, bootimage.ReasonArchitectureNotInStream, "the %s stream has no GCP image for %s", in.OSStream, in.Arch), nil
	}
	target := fmt.Sprintf("projects/%s/global/images/%s", img.Project, img.Name)
	d.Target = target
	if target == current {
		return d.With(bootimage.NoChange, bootimage.ReasonUpToDate, "boot image %s is the stream's", current), nil
	}
	if catalog := images(in.Cluster); catalog != nil {
		found, err := catalog.Image(ctx, img.Project, img.Name)
		switch {
		case errors.Is(err, bootimage.ErrNoCatalog):
			// No credentials: the prefix rule alone decides.
		case err != nil:
			return d, fmt.Errorf("getting GCP image %s: %w", target, err)
		case found == nil:
			return d.With(bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "target image %s does not exist", target), nil
		case found.Deprecation != "" && found.Deprecation != "ACTIVE":
			return d.With(bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "target image %s is %s", target, found.Deprecation), nil
		}
	}
	d.ProviderSpecPatch = []bootimage.PatchOp{bootimage.Set(path, target)}
	return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "boot image %s is outdated: the stream's is %s", current, target), nil
}

// read returns the current boot image and the path of its field: a providerSpec's boot disk, or
// a CAPG template's image (a full projects/<p>/global/images/<n> reference).
func (platform) read(d bootimage.Decision, in bootimage.PlatformInput) (current, path string, _ bootimage.Decision, ok bool) {
	if in.Spec.Template() {
		var image, family *string
		if err := in.Spec.Field("image", &image); err != nil {
			return "", "", in.Spec.Invalid(d, "%v", err), false
		}
		if err := in.Spec.Field("imageFamily", &family); err != nil {
			return "", "", in.Spec.Invalid(d, "%v", err), false
		}
		switch {
		case image != nil && *image != "":
			return *image, "/image", d, true
		case family != nil && *family != "":
			d.Current = *family
			return "", "", d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "the image is given by imageFamily %s, which follows its family's newest image; left to its owner", *family), false
		}
		return "", "", d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "no image or imageFamily: CAPG picks its default image, not an RHCOS one; left to its owner"), false
	}
	var disks []json.RawMessage
	if err := in.Spec.Field("disks", &disks); err != nil {
		return "", "", in.Spec.Invalid(d, "%v", err), false
	}
	boot := -1
	var bootDisk map[string]json.RawMessage
	for i, raw := range disks {
		var disk map[string]json.RawMessage
		var flags struct {
			Boot bool `json:"boot"`
		}
		if err := json.Unmarshal(raw, &disk); err != nil || json.Unmarshal(raw, &flags) != nil || disk == nil {
			return "", "", in.Spec.Invalid(d, "disks[%d] is not a disk object", i), false
		}
		if flags.Boot {
			boot, bootDisk = i, disk
			break
		}
	}
	if boot < 0 {
		return "", "", in.Spec.Invalid(d, "no disk has boot: true"), false
	}
	if image, ok := bootDisk["image"]; !ok || json.Unmarshal(image, &current) != nil || current == "" {
		return "", "", in.Spec.Invalid(d, "disks[%d].image is missing or not a string", boot), false
	}
	return current, fmt.Sprintf("/disks/%d/image", boot), d, true
}
