package bootimage_test

import (
	"github.com/coreos/stream-metadata-go/stream"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

const rhel10 = fixtures.OSStreamRHEL10

// on50 makes the cluster a 5.0 one: coreos-bootimages with both streams, OSImageStream default
// defaultStream, and the pools' streams.
func on50(defaultStream string, pools map[string]string) mutate {
	return func(c *bootimage.Cluster, _ *bootimage.Object) {
		c.BootImages = fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion)
		c.DefaultOSStream, c.PoolStreams = defaultStream, pools
	}
}

var labelled = fixtures.OSStreamLabelled

// joins gives the object a user-data stub of pool.
func joins(pool string) mutate {
	return func(_ *bootimage.Cluster, o *bootimage.Object) {
		o.UserData = &bootimage.UserData{SecretName: pool + "-user-data", Found: true,
			Data: []byte(`{"ignition":{"config":{"merge":[{"source":"https://api-int.demo.example.com:22623/config/` + pool + `"}]},"version":"3.2.0"}}`)}
	}
}

var _ = Describe("OS streams", func() {
	DescribeTable("each object takes its own stream's image, never another stream's",
		func(platform configv1.PlatformType, providerSpec string, ms []mutate, action bootimage.Action, reason, osStream, target string) {
			d := decide(platform, providerSpec, ms...)
			Expect(d.Action).To(Equal(action), d.Message)
			Expect(d.Reason).To(Equal(reason), d.Message)
			Expect(d.Stream).To(Equal(osStream))
			Expect(d.Target).To(Equal(target))
		},
		Entry("AWS rhel-10 label", configv1.AWSPlatformType, awsOld, []mutate{on50(rhel10, nil), labelled(rhel10)},
			bootimage.Update, bootimage.ReasonImageOutdated, rhel10, fixtures.RHEL10AWSAMIUSEast1),
		Entry("AWS rhel-9 label on a rhel-10 cluster", configv1.AWSPlatformType, awsOld, []mutate{on50(rhel10, nil), labelled("rhel-9")},
			bootimage.Update, bootimage.ReasonImageOutdated, "rhel-9", fixtures.NewAWSAMIUSEast1),
		Entry("AWS rhel-10 in a region rhel-10 lacks: no rhel-9 AMI instead", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-west-2", fixtures.OldAWSAMI), []mutate{on50(rhel10, nil), labelled(rhel10)},
			bootimage.Skip, bootimage.ReasonRegionNotInStream, rhel10, ""),
		Entry("GCP rhel-10", configv1.GCPPlatformType, gcpOld, []mutate{on50(rhel10, nil), labelled(rhel10)},
			bootimage.Update, bootimage.ReasonImageOutdated, rhel10, fixtures.RHEL10GCPImage),
		Entry("GCP rhel-9", configv1.GCPPlatformType, gcpOld, []mutate{on50(rhel10, nil), labelled("rhel-9")},
			bootimage.Update, bootimage.ReasonImageOutdated, "rhel-9", fixtures.NewGCPImage),
		Entry("Azure rhel-10 Gen2", configv1.AzurePlatformType, azureOld, []mutate{on50(rhel10, nil), labelled(rhel10)},
			bootimage.Update, bootimage.ReasonImageOutdated, rhel10, "azureopenshift:aro4:"+fixtures.RHEL10AzureNoPlanSKU+":"+fixtures.RHEL10AzureVersion),
		Entry("a stream the ConfigMap lacks", configv1.AWSPlatformType, awsOld, []mutate{on50(rhel10, nil), labelled("centos-10")},
			bootimage.Skip, bootimage.ReasonOSStreamNotInBootImages, "centos-10", ""),
		Entry("rhel-10 without a streams key (a payload before 5.0)", configv1.AWSPlatformType, awsOld, []mutate{labelled(rhel10)},
			bootimage.Skip, bootimage.ReasonOSStreamNotInBootImages, rhel10, ""),
		Entry("rhel-9 without a streams key: the stream key", configv1.AWSPlatformType, awsOld, []mutate{labelled("rhel-9")},
			bootimage.Update, bootimage.ReasonImageOutdated, "rhel-9", fixtures.NewAWSAMIUSEast1),
		Entry("an empty label is no label", configv1.AWSPlatformType, awsOld, []mutate{on50(rhel10, nil), labelled(""), joins("worker")},
			bootimage.Update, bootimage.ReasonImageOutdated, rhel10, fixtures.RHEL10AWSAMIUSEast1),
		Entry("unlabelled, no OSImageStream: rhel-9, as the MCO", configv1.AWSPlatformType, awsOld, []mutate{joins("worker")},
			bootimage.Update, bootimage.ReasonImageOutdated, "rhel-9", fixtures.NewAWSAMIUSEast1),
		Entry("unlabelled on a cluster defaulting to rhel-10", configv1.AWSPlatformType, awsOld, []mutate{on50(rhel10, nil), joins("worker")},
			bootimage.Update, bootimage.ReasonImageOutdated, rhel10, fixtures.RHEL10AWSAMIUSEast1),
		Entry("unlabelled in a pool of rhel-9 on a rhel-10 cluster", configv1.AWSPlatformType, awsOld, []mutate{on50(rhel10, map[string]string{"worker": "rhel-9"}), joins("worker")},
			bootimage.Update, bootimage.ReasonImageOutdated, "rhel-9", fixtures.NewAWSAMIUSEast1),
		Entry("unlabelled in a custom pool takes the worker pool's", configv1.AWSPlatformType, awsOld, []mutate{on50("rhel-9", map[string]string{"worker": rhel10, "infra": ""}), joins("infra")},
			bootimage.Update, bootimage.ReasonImageOutdated, rhel10, fixtures.RHEL10AWSAMIUSEast1),
		Entry("unlabelled in a custom pool of its own stream", configv1.AWSPlatformType, awsOld, []mutate{on50(rhel10, map[string]string{"worker": rhel10, "legacy": "rhel-9"}), joins("legacy")},
			bootimage.Update, bootimage.ReasonImageOutdated, "rhel-9", fixtures.NewAWSAMIUSEast1),
		Entry("an invalid entry errs only its own stream's objects", configv1.AWSPlatformType, awsOld, []mutate{on50(rhel10, nil), labelled(rhel10), func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.BootImages.Data["streams"] = `{"rhel-9": ` + c.BootImages.Data["stream"] + `, "rhel-10": {"stream": 5}}`
		}}, bootimage.Error, bootimage.ReasonInvalidStream, rhel10, ""),
		Entry("... and the other stream's objects go on", configv1.AWSPlatformType, awsOld, []mutate{on50(rhel10, nil), labelled("rhel-9"), func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.BootImages.Data["streams"] = `{"rhel-9": ` + c.BootImages.Data["stream"] + `, "rhel-10": {"stream": 5}}`
		}}, bootimage.Update, bootimage.ReasonImageOutdated, "rhel-9", fixtures.NewAWSAMIUSEast1),
	)

	It("never takes the stream key for a labelled object when streams has no such entry", func() {
		d := decide(configv1.AWSPlatformType, awsOld, on50(rhel10, nil), labelled("rhel-9"), func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.BootImages.Data["streams"] = `{"rhel-10": ` + `{"stream":"x","architectures":{"x86_64":{}}}}`
		})
		Expect(d.Action).To(Equal(bootimage.Skip))
		Expect(d.Reason).To(Equal(bootimage.ReasonOSStreamNotInBootImages))
		Expect(d.Message).To(Equal("label machineconfiguration.openshift.io/osstream=rhel-9 names OS stream rhel-9, which coreos-bootimages key streams does not carry (it has rhel-10)"))
	})

	It("names the stream and the regions it has when the region is missing", func() {
		d := decide(configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-west-2", fixtures.OldAWSAMI), on50(rhel10, nil), labelled(rhel10))
		Expect(d.Message).To(Equal("the rhel-10 stream has no x86_64 AMI for region us-west-2 (it has AMIs in us-east-1, us-gov-west-1)"))
		Expect(d.LeftBehind()).To(BeTrue(), "counts for skew")
	})

	It("names the stream and its architectures when the architecture is missing", func() {
		d := decide(configv1.AWSPlatformType, awsOld, on50(rhel10, nil), labelled(rhel10), func(c *bootimage.Cluster, _ *bootimage.Object) {
			streams := fixtures.Streams50()
			delete(streams[rhel10].Architectures, "aarch64")
			c.BootImages = fixtures.BootImagesConfigMap50(streams, fixtures.OCP50ReleaseVersion)
		}, func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Annotations = map[string]string{bootimage.ArchAnnotation: "kubernetes.io/arch=arm64"}
		})
		Expect(d.Reason).To(Equal(bootimage.ReasonArchitectureNotInStream))
		Expect(d.Message).To(Equal("the rhel-10 stream has no aarch64 boot images (it has x86_64)"))
	})

	It("counts a stream the ConfigMap lacks for skew: its machines keep the install image", func() {
		d := decide(configv1.AWSPlatformType, awsOld, on50(rhel10, nil), labelled("centos-10"))
		Expect(d.LeftBehind()).To(BeTrue())
	})

	DescribeTable("says when the labels or the pool disagree with the stream, and decides by the metadata label",
		func(ms []mutate, osStream, note string) {
			d := decide(configv1.AWSPlatformType, awsOld, ms...)
			Expect(d.Stream).To(Equal(osStream))
			if note == "" {
				Expect(d.StreamNote).To(BeEmpty())
				return
			}
			Expect(d.StreamNote).To(ContainSubstring(note))
		},
		Entry("agreeing", []mutate{on50(rhel10, nil), labelled(rhel10), joins("worker")}, rhel10, ""),
		Entry("a rhel-9 label in a rhel-10 pool", []mutate{on50(rhel10, nil), labelled("rhel-9"), joins("worker")}, "rhel-9",
			"its machines join MachineConfigPool worker, which runs rhel-10 (OSImageStream cluster status.defaultStream): they boot rhel-9 and then rebase to rhel-10"),
		Entry("the template label disagreeing", []mutate{on50(rhel10, nil), labelled(rhel10), func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.TemplateLabels = map[string]string{bootimage.OSStreamLabel: "rhel-9"}
		}}, rhel10, "the machine template's label machineconfiguration.openshift.io/osstream=rhel-9 disagrees"),
		Entry("unknown pool: nothing to disagree with", []mutate{on50("rhel-9", nil), labelled(rhel10)}, rhel10, ""),
		Entry("no OSImageStream: the cluster says no stream to disagree with", []mutate{labelled(rhel10), joins("worker")}, rhel10, ""),
	)

	It("takes the master pool for the ControlPlaneMachineSet", func() {
		c := fixtures.DecisionCluster(configv1.AWSPlatformType)
		on50("rhel-9", map[string]string{"master": rhel10})(&c, nil)
		o := fixtures.DecisionMachineSet(awsOld)
		o.Resource = operatorv1.ControlPlaneMachineSets
		Expect(c.OSStream(o).Name).To(Equal(rhel10))
	})

	It("reads the pool of spec 2 and spec 3 stubs", func() {
		Expect(bootimage.UserDataPool([]byte(fixtures.IgnitionStubV3))).To(Equal("worker"))
		Expect(bootimage.UserDataPool([]byte(fixtures.IgnitionStubV2))).To(Equal("worker"))
		Expect(bootimage.UserDataPool([]byte(`{"ignition":{"config":{"merge":[{"source":"https://example.com/other/worker"}]}}}`))).To(BeEmpty())
		Expect(bootimage.UserDataPool([]byte(`not json`))).To(BeEmpty())
	})

	It("records the oldest RHCOS across streams by version, not by string", func() {
		Expect(bootimage.CompareRHCOSVersions("9.8.20260403-0", fixtures.RHEL10Release)).To(BeNumerically("<", 0))
	})
})

// MCO#6404: Azure in 5.0.
var _ = DescribeTable("Azure HyperV generation and security type (MCO#6404)",
	func(img fixtures.AzureImage, security string, streams func() *stream.Stream, action bootimage.Action, reason, target string) {
		d := decide(configv1.AzurePlatformType, fixtures.AzureProviderSpec(img, security), func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.BootImages = fixtures.BootImagesConfigMap(streams(), "4.20.3")
		})
		Expect(d.Action).To(Equal(action), d.Message)
		Expect(d.Reason).To(Equal(reason))
		Expect(d.Target).To(Equal(target))
	},
	Entry("an unpaid SKU with gen2 (5.0 format) is Gen2", fixtures.AzureImage{Publisher: "azureopenshift", Offer: "aro4", SKU: "aro_5-0_x86_gen2", Version: "9.6.2026", Type: "MarketplaceNoPlan"}, "", fixtures.Stream,
		bootimage.Update, bootimage.ReasonImageOutdated, "azureopenshift:aro4:"+fixtures.NewAzureNoPlanSKU+"_v2:"+fixtures.NewAzureVersion),
	Entry("an unpaid SKU with -v2 is Gen2", fixtures.AzureImage{Publisher: "azureopenshift", Offer: "aro4", SKU: "aro_418-v2", Version: "9.6.2026", Type: "MarketplaceNoPlan"}, "", fixtures.Stream,
		bootimage.Update, bootimage.ReasonImageOutdated, "azureopenshift:aro4:"+fixtures.NewAzureNoPlanSKU+"_v2:"+fixtures.NewAzureVersion),
	Entry("an unpaid SKU with neither is Gen1", fixtures.AzureImage{Publisher: "azureopenshift", Offer: "aro4", SKU: "aro_416", Version: "416.94.2024", Type: "MarketplaceNoPlan"}, "", fixtures.Stream,
		bootimage.Update, bootimage.ReasonImageOutdated, "azureopenshift:aro4:"+fixtures.NewAzureNoPlanSKU+":"+fixtures.NewAzureVersion),
	Entry("a Gen1 set whose stream has no hyperVGen1 image is a Skip, not an Error", fixtures.AzureImage{Publisher: "azureopenshift", Offer: "aro4", SKU: "aro_416", Version: "416.94.2024", Type: "MarketplaceNoPlan"}, "", fixtures.RHEL10Stream,
		bootimage.Skip, bootimage.ReasonArchitectureNotInStream, ""),
	Entry("Confidential VM", fixtures.DefaultAzureImage, "ConfidentialVM", fixtures.Stream, bootimage.Skip, bootimage.ReasonConfidentialVM, ""),
	Entry("Trusted Launch", fixtures.DefaultAzureImage, "TrustedLaunch", fixtures.Stream, bootimage.Skip, bootimage.ReasonConfidentialVM, ""),
)
