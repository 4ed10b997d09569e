package cloud_test

import (
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

func clusterWith(platform configv1.PlatformType, images any) bootimage.Cluster {
	gates := featuregates.New("4.20.3", nil, nil)
	return bootimage.Cluster{
		Platform: platform, Gates: gates, Stable: true, ControlPlaneArch: "amd64", Cloud: images,
		Effective:  bootimage.EffectiveConfiguration(operatorv1.ManagedBootImages{}, platform, gates).Status,
		BootImages: fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
	}
}

func awsCluster(images any) bootimage.Cluster {
	return clusterWith(configv1.AWSPlatformType, images)
}

func gcpCluster(images any) bootimage.Cluster {
	return clusterWith(configv1.GCPPlatformType, images)
}
