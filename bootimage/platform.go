package bootimage

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
)

// AzureStackHub is the platform decisions see for Azure with platformStatus.azure.cloudName
// AzureStackCloud. Its boot images are fixed at install, so, as the MCO's CheckBootImagePlatform
// says, nothing is managed there: no MachineSet or CPMS entry, Manual skew enforcement.
const AzureStackHub configv1.PlatformType = "AzureStackHub"

// PlatformOf returns the cluster's platform as boot image decisions see it: the Infrastructure's
// platform type, with Azure Stack Hub apart from public Azure (AzureStackHub).
func PlatformOf(infra *configv1.Infrastructure) configv1.PlatformType {
	//lint:ignore SA1019 older clusters set only this
	platform := infra.Status.Platform
	if ps := infra.Status.PlatformStatus; ps != nil {
		if ps.Type != "" {
			platform = ps.Type
		}
		if platform == configv1.AzurePlatformType && ps.Azure != nil && ps.Azure.CloudName == configv1.AzureStackCloud {
			return AzureStackHub
		}
	}
	return platform
}

// UnsupportedMessage says why boot images of resource are not managed on platform.
func UnsupportedMessage(resource string, platform configv1.PlatformType) string {
	if platform == AzureStackHub {
		return fmt.Sprintf("boot images of %s are not managed on Azure Stack Hub (Infrastructure status.platformStatus.azure.cloudName %s): its boot images are fixed at install", resource, configv1.AzureStackCloud)
	}
	return fmt.Sprintf("boot images of %s are not managed on platform %q", resource, platform)
}
