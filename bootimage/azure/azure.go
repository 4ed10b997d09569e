// Package azure decides Azure MachineSets' boot images: the stream's marketplace image. It calls
// no cloud.
package azure

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/coreos/stream-metadata-go/stream"
	"github.com/coreos/stream-metadata-go/stream/rhcos"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
)

// platform decides the boot images of azure machines.
type platform struct{}

func init() { bootimage.Register(platform{}) }

// imageFailure: Azure Resource Manager's codes for an image it will not deploy: not found
// (ImageNotFound, PlatformImageNotFound, GalleryImageNotFound), or a marketplace plan the
// subscription may not buy or has not accepted.
var imageFailure = regexp.MustCompile(`ImageNotFound|MarketplacePurchaseEligibilityFailed|ResourcePurchaseValidationFailed|VMMarketplaceInvalidInput`)

func (platform) Traits() bootimage.PlatformTraits {
	return bootimage.PlatformTraits{Type: configv1.AzurePlatformType, MachineSetGate: featuregates.ManagedBootImagesAzure, ControlPlane: true, TemplateKind: "AzureMachineTemplate", ClusterAPIProvider: "sigs.k8s.io/cluster-api-provider-azure", Arches: []string{"x86_64", "aarch64"},
		ImageFailure: imageFailure,
		InStream: func(a stream.Arch) bool {
			return a.RHELCoreOSExtensions != nil && a.RHELCoreOSExtensions.Marketplace != nil && a.RHELCoreOSExtensions.Marketplace.Azure != nil
		}}
}

func (platform) Current(spec bootimage.MachineSpec) string {
	if spec.Template() {
		var img capzImage
		_ = spec.Field("image", &img)
		return capzCurrent(img)
	}
	var img azureImage
	if spec.Field("image", &img) == nil && img != (azureImage{}) {
		return img.String()
	}
	return ""
}

type azureImage struct {
	Publisher  string `json:"publisher"`
	Offer      string `json:"offer"`
	SKU        string `json:"sku"`
	Version    string `json:"version"`
	ResourceID string `json:"resourceID"`
	Type       string `json:"type"`
}

func (i azureImage) String() string {
	if i.Publisher == "" && i.ResourceID != "" {
		return i.ResourceID
	}
	return strings.Join([]string{i.Publisher, i.Offer, i.SKU, i.Version}, ":")
}

// Azure marketplace image types.
const (
	azureNoPlan   = "MarketplaceNoPlan"
	azureWithPlan = "MarketplaceWithPlan"
)

func (a platform) Decide(_ context.Context, d bootimage.Decision, in bootimage.PlatformInput) (bootimage.Decision, error) {
	current, security, decided, ok := a.read(d, in)
	if !ok {
		return decided, nil
	}
	d.Current = current.String()
	variant, paid, ok := azureVariant(current, in.Cluster.InfrastructureName)
	if !ok && current.Publisher == "" {
		return d.With(bootimage.Skip, bootimage.ReasonCustomImage, "image resourceID %s does not name the cluster's infrastructure %q, so it is not the installer's upload but an image someone else made: left alone. "+
			"To move this MachineSet to the stream's marketplace image, set its image to publisher azureopenshift, offer aro4 (any SKU and version); the next update follows the stream", current.ResourceID, in.Cluster.InfrastructureName), nil
	}
	if !ok {
		return d.With(bootimage.Skip, bootimage.ReasonCustomImage, "image %s is not an OpenShift marketplace image: left alone", current), nil
	}
	if security.value != "" {
		return d.With(bootimage.Skip, bootimage.ReasonConfidentialVM, "%s is %s: confidential and trusted-launch VMs need images this operator does not manage", security.field, security.value), nil
	}
	gen2 := in.Arch == "aarch64" || !azureGen1(current, variant)
	images := azureMarketplace(in.Stream.Architectures[in.Arch].RHELCoreOSExtensions, variant)
	var img *rhcos.AzureMarketplaceImage
	if images != nil {
		img = images.Gen1
		if gen2 {
			img = images.Gen2
		}
	}
	gen := map[bool]string{true: "Gen2", false: "Gen1"}[gen2]
	if img == nil || img.Publisher == "" || img.SKU == "" || img.Version == "" {
		return d.With(bootimage.Skip, bootimage.ReasonArchitectureNotInStream, "the %s stream has no Azure %s HyperV %s marketplace image for %s", in.OSStream, variant, gen, in.Arch), nil
	}
	target := azureImage{Publisher: img.Publisher, Offer: img.Offer, SKU: img.SKU, Version: img.Version, Type: azureNoPlan}
	if paid {
		target.Type = azureWithPlan
	}
	d.Target = target.String()
	if current == target {
		return d.With(bootimage.NoChange, bootimage.ReasonUpToDate, "image %s is the stream's", d.Current), nil
	}
	d.ProviderSpecPatch = []bootimage.PatchOp{
		bootimage.Set("/image/publisher", target.Publisher), bootimage.Set("/image/offer", target.Offer), bootimage.Set("/image/sku", target.SKU),
		bootimage.Set("/image/version", target.Version), bootimage.Set("/image/resourceID", ""), bootimage.Set("/image/type", target.Type),
	}
	if in.Spec.Template() {
		d.ProviderSpecPatch = []bootimage.PatchOp{
			bootimage.Set("/image/marketplace/publisher", target.Publisher), bootimage.Set("/image/marketplace/offer", target.Offer), bootimage.Set("/image/marketplace/sku", target.SKU),
			bootimage.Set("/image/marketplace/version", target.Version), bootimage.Set("/image/marketplace/thirdPartyImage", paid),
		}
	}
	return d.With(bootimage.Update, bootimage.ReasonImageOutdated, "image %s is outdated: the stream's %s %s image is %s", d.Current, variant, gen, d.Target), nil
}

// azureSecurity is the security type of the VM and the field that sets it.
type azureSecurity struct{ field, value string }

// capzImage is a CAPZ AzureMachineTemplate's spec.template.spec.image: one of its fields is set.
type capzImage struct {
	ID             *string         `json:"id"`
	SharedGallery  json.RawMessage `json:"sharedGallery"`
	ComputeGallery json.RawMessage `json:"computeGallery"`
	Marketplace    *struct {
		Publisher       string `json:"publisher"`
		Offer           string `json:"offer"`
		SKU             string `json:"sku"`
		Version         string `json:"version"`
		ThirdPartyImage bool   `json:"thirdPartyImage"`
	} `json:"marketplace"`
}

// read returns the current image, in the providerSpec's terms, and the security type: a
// providerSpec's image and securityProfile.settings.securityType, or a CAPZ template's
// image.marketplace (thirdPartyImage meaning a purchase plan) and securityProfile.securityType.
func (platform) read(d bootimage.Decision, in bootimage.PlatformInput) (azureImage, azureSecurity, bootimage.Decision, bool) {
	if !in.Spec.Template() {
		var current azureImage
		var security struct {
			Settings struct {
				SecurityType string `json:"securityType"`
			} `json:"settings"`
		}
		if err := in.Spec.Field("image", &current); err != nil {
			return current, azureSecurity{}, in.Spec.Invalid(d, "%v", err), false
		}
		if err := in.Spec.Field("securityProfile", &security); err != nil {
			return current, azureSecurity{}, in.Spec.Invalid(d, "%v", err), false
		}
		if current == (azureImage{}) {
			return current, azureSecurity{}, in.Spec.Invalid(d, "image is empty"), false
		}
		return current, azureSecurity{"securityProfile.settings.securityType", security.Settings.SecurityType}, d, true
	}
	var img capzImage
	var security struct {
		SecurityType string `json:"securityType"`
	}
	if err := in.Spec.Field("image", &img); err != nil {
		return azureImage{}, azureSecurity{}, in.Spec.Invalid(d, "%v", err), false
	}
	if err := in.Spec.Field("securityProfile", &security); err != nil {
		return azureImage{}, azureSecurity{}, in.Spec.Invalid(d, "%v", err), false
	}
	d.Current = capzCurrent(img)
	switch {
	case img.ID != nil || img.SharedGallery != nil || img.ComputeGallery != nil:
		return azureImage{}, azureSecurity{}, d.With(bootimage.Skip, bootimage.ReasonCustomImage, "image is given by id, computeGallery or sharedGallery, not by marketplace: a custom image, left alone"), false
	case img.Marketplace == nil:
		return azureImage{}, azureSecurity{}, d.With(bootimage.Skip, bootimage.ReasonImageNotByID, "no image: CAPZ picks its default image, not an RHCOS one; left to its owner"), false
	}
	m := img.Marketplace
	current := azureImage{Publisher: m.Publisher, Offer: m.Offer, SKU: m.SKU, Version: m.Version, Type: azureNoPlan}
	if m.ThirdPartyImage {
		current.Type = azureWithPlan
	}
	return current, azureSecurity{"securityProfile.securityType", security.SecurityType}, d, true
}

// capzCurrent is a CAPZ image in the form of Decision.Current.
func capzCurrent(img capzImage) string {
	switch {
	case img.Marketplace != nil:
		m := img.Marketplace
		return azureImage{Publisher: m.Publisher, Offer: m.Offer, SKU: m.SKU, Version: m.Version}.String()
	case img.ID != nil:
		return *img.ID
	case img.ComputeGallery != nil:
		return string(img.ComputeGallery)
	}
	return string(img.SharedGallery)
}

// azureVariant names the stream's marketplace variant that matches the current image, and whether
// it is paid (has a purchase plan). Installer uploads (resourceID in the cluster's resource group)
// move to the no-purchase-plan images.
func azureVariant(img azureImage, infraName string) (string, bool, bool) {
	if img.Publisher == "" {
		upload := img.ResourceID != "" && infraName != "" && strings.Contains(img.ResourceID, infraName)
		return "no-purchase-plan", false, upload
	}
	if img.Publisher == "azureopenshift" {
		return "no-purchase-plan", false, true
	}
	product := map[string]string{"rh-ocp-worker": "ocp", "rh-opp-worker": "opp", "rh-oke-worker": "oke"}[img.Offer]
	switch {
	case product == "":
		return "", false, false
	case img.Publisher == "redhat":
		return product, true, true
	case img.Publisher == "redhat-limited":
		return product + "-emea", true, true
	}
	return "", false, false
}

// azureGen1 reports whether the current image is HyperV Gen1, so the update keeps the generation.
func azureGen1(img azureImage, variant string) bool {
	if img.Publisher == "" {
		return !strings.Contains(strings.ToLower(img.ResourceID), "gen2")
	}
	sku := strings.ToLower(img.SKU)
	if strings.Contains(sku, "gen1") {
		return true
	}
	// Unpaid SKUs name Gen2 with -v2 (4.x) or gen2 (5.0, such as aro_5-0_x86_gen2), as MCO#6404 reads them.
	return variant == "no-purchase-plan" && !strings.Contains(sku, "v2") && !strings.Contains(sku, "gen2")
}

func azureMarketplace(ext *rhcos.Extensions, variant string) *rhcos.AzureMarketplaceImages {
	if ext == nil || ext.Marketplace == nil || ext.Marketplace.Azure == nil {
		return nil
	}
	a := ext.Marketplace.Azure
	return map[string]*rhcos.AzureMarketplaceImages{
		"no-purchase-plan": a.NoPurchasePlan, "ocp": a.OCP, "opp": a.OPP, "oke": a.OKE,
		"ocp-emea": a.OCPEMEA, "opp-emea": a.OPPEMEA, "oke-emea": a.OKEEMEA,
	}[variant]
}
