package bootimage

import (
	"context"
	"strings"

	"github.com/coreos/stream-metadata-go/stream/rhcos"
)

type azure struct{}

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

func (azure) decide(_ context.Context, d Decision, in providerInput) (Decision, error) {
	var current azureImage
	var security struct {
		Settings struct {
			SecurityType string `json:"securityType"`
		} `json:"settings"`
	}
	if err := in.spec.field("image", &current); err != nil {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: %v", err), nil
	}
	if err := in.spec.field("securityProfile", &security); err != nil {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: %v", err), nil
	}
	if current == (azureImage{}) {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: image is empty"), nil
	}
	d.Current = current.String()
	variant, paid, ok := azureVariant(current, in.infraNam)
	if !ok && current.Publisher == "" {
		return d.with(Skip, ReasonCustomImage, "image resourceID %s does not name the cluster's infrastructure %q, so it is not the installer's upload but an image someone else made: left alone. "+
			"To move this MachineSet to the stream's marketplace image, set its image to publisher azureopenshift, offer aro4 (any SKU and version); the next update follows the stream", current.ResourceID, in.infraNam), nil
	}
	if !ok {
		return d.with(Skip, ReasonCustomImage, "image %s is not an OpenShift marketplace image: left alone", current), nil
	}
	if t := security.Settings.SecurityType; t != "" {
		return d.with(Skip, ReasonConfidentialVM, "securityProfile.settings.securityType is %s: confidential and trusted-launch VMs need images this operator does not manage", t), nil
	}
	gen2 := in.arch == "aarch64" || !azureGen1(current, variant)
	images := azureMarketplace(in.streams.Default.Architectures[in.arch].RHELCoreOSExtensions, variant)
	var img *rhcos.AzureMarketplaceImage
	if images != nil {
		img = images.Gen1
		if gen2 {
			img = images.Gen2
		}
	}
	gen := map[bool]string{true: "Gen2", false: "Gen1"}[gen2]
	if img == nil || img.Publisher == "" || img.SKU == "" || img.Version == "" {
		return d.with(Skip, ReasonArchitectureNotInStream, "the stream has no Azure %s HyperV %s marketplace image for %s", variant, gen, in.arch), nil
	}
	target := azureImage{Publisher: img.Publisher, Offer: img.Offer, SKU: img.SKU, Version: img.Version, Type: azureNoPlan}
	if paid {
		target.Type = azureWithPlan
	}
	d.Target = target.String()
	if current == target {
		return d.with(NoChange, ReasonUpToDate, "image %s is the stream's", d.Current), nil
	}
	d.ProviderSpecPatch = []PatchOp{
		set("/image/publisher", target.Publisher), set("/image/offer", target.Offer), set("/image/sku", target.SKU),
		set("/image/version", target.Version), set("/image/resourceID", ""), set("/image/type", target.Type),
	}
	return d.with(Update, ReasonImageOutdated, "image %s is outdated: the stream's %s %s image is %s", d.Current, variant, gen, d.Target), nil
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
	return variant == "no-purchase-plan" && !strings.Contains(sku, "v2")
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
