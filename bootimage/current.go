package bootimage

import (
	configv1 "github.com/openshift/api/config/v1"
)

// CurrentImage returns the boot image providerSpec names on platform, in the form of
// Decision.Current; "" when it cannot be read. Decisions taken before the image is read (not
// selected, owned by another controller, ...) leave Current empty: this says which image such an
// object keeps.
func CurrentImage(platform configv1.PlatformType, providerSpec []byte) string {
	spec, err := parseProviderSpec(providerSpec)
	if err != nil {
		return ""
	}
	switch platform {
	case configv1.AWSPlatformType:
		var ami struct {
			ID  string `json:"id"`
			ARN string `json:"arn"`
		}
		if spec.field("ami", &ami) == nil {
			if ami.ID != "" {
				return ami.ID
			}
			return ami.ARN
		}
	case configv1.GCPPlatformType:
		var disks []struct {
			Boot  bool   `json:"boot"`
			Image string `json:"image"`
		}
		if spec.field("disks", &disks) == nil {
			for _, d := range disks {
				if d.Boot {
					return d.Image
				}
			}
		}
	case configv1.AzurePlatformType:
		var img azureImage
		if spec.field("image", &img) == nil && img != (azureImage{}) {
			return img.String()
		}
	case configv1.VSpherePlatformType:
		var template string
		if spec.field("template", &template) == nil {
			return template
		}
	}
	return ""
}
