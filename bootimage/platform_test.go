package bootimage_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// The platforms the MCO's CheckBootImagePlatform (pkg/controller/common/featuregates.go) supports
// are the ones PlatformOf leaves as they are; Azure Stack Hub is its own, unmanaged platform.
var _ = DescribeTable("PlatformOf",
	func(status configv1.InfrastructureStatus, want configv1.PlatformType) {
		Expect(bootimage.PlatformOf(&configv1.Infrastructure{Status: status})).To(Equal(want))
	},
	Entry("public Azure", configv1.InfrastructureStatus{PlatformStatus: &configv1.PlatformStatus{Type: configv1.AzurePlatformType, Azure: &configv1.AzurePlatformStatus{CloudName: configv1.AzurePublicCloud}}}, configv1.AzurePlatformType),
	Entry("Azure without platformStatus.azure", configv1.InfrastructureStatus{PlatformStatus: &configv1.PlatformStatus{Type: configv1.AzurePlatformType}}, configv1.AzurePlatformType),
	Entry("Azure Stack Hub", configv1.InfrastructureStatus{PlatformStatus: &configv1.PlatformStatus{Type: configv1.AzurePlatformType, Azure: &configv1.AzurePlatformStatus{CloudName: configv1.AzureStackCloud}}}, bootimage.AzureStackHub),
	//lint:ignore SA1019 what older clusters set
	Entry("an old cluster with status.platform only", configv1.InfrastructureStatus{Platform: configv1.GCPPlatformType}, configv1.GCPPlatformType),
)
