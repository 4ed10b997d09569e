package bootimage_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/expect"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// applyPatch applies d's providerSpec patch to the original spec and returns both as generic JSON.
var ctx = context.Background()

type mutate = fixtures.Mutation

func decide(platform configv1.PlatformType, providerSpec string, mutations ...mutate) bootimage.Decision {
	GinkgoHelper()
	c, o := fixtures.DecisionCluster(platform), fixtures.DecisionMachineSet(providerSpec)
	for _, m := range mutations {
		m(&c, &o)
	}
	d, err := bootimage.Decide(ctx, c, o)
	Expect(err).NotTo(HaveOccurred())
	return d
}

var (
	awsOld   = fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)
	gcpOld   = fixtures.GCPProviderSpec(fixtures.OldGCPImage)
	azureOld = fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, "")
)

var _ = Describe("Decide", func() {
	DescribeTable("skip and error reasons, each where it is the first check that applies",
		func(platform configv1.PlatformType, providerSpec string, m mutate, action bootimage.Action, reason, message string) {
			d := decide(platform, providerSpec, m)
			Expect(d.Action).To(Equal(action))
			Expect(d.Reason).To(Equal(reason))
			Expect(d.Message).To(ContainSubstring(message))
			Expect(d.ProviderSpecPatch).To(BeNil())
		},
		Entry("Azure Stack Hub: skipped with the cloud named (the MCO's CheckBootImagePlatform)", bootimage.AzureStackHub, awsOld, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Skip, bootimage.ReasonUnsupportedPlatform, "not managed on Azure Stack Hub (Infrastructure status.platformStatus.azure.cloudName AzureStackCloud)"),
		Entry(nil, configv1.BareMetalPlatformType, awsOld, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Skip, bootimage.ReasonUnsupportedPlatform, `not managed on platform "BareMetal"`),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Gates = gateSet{featuregates.ManagedBootImagesAWS: false}
		}), bootimage.Skip, bootimage.ReasonFeatureGateDisabled, "feature gate ManagedBootImagesAWS is off"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Gates = nil
			c.GatesError = errString("FeatureGate/cluster not found")
		}), bootimage.Skip, bootimage.ReasonFeatureGateDisabled, "feature gates unknown: FeatureGate/cluster not found"),
		Entry("NotSelected wins over a broken providerSpec", configv1.AWSPlatformType, `{not json`, mutate(func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Effective = spec(mm(ms, operatorv1.Partial))
		}), bootimage.Skip, bootimage.ReasonNotSelected, "not selected by MachineConfiguration/cluster status.managedBootImagesStatus for machinesets: its labels do not match the Partial machineResourceSelector"),
		Entry("a stored CPMS Partial says why it selects nothing", configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, o *bootimage.Object) {
			c.Effective = spec(mm(cpms, operatorv1.Partial))
			o.Kind, o.Resource = bootimage.KindControlPlaneMachineSet, cpms
		}), bootimage.Skip, bootimage.ReasonNotSelected, "for controlplanemachinesets: mode Partial, which the singleton ControlPlaneMachineSet cannot take, so it counts as None"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Effective = spec(mm(ms, operatorv1.None))
		}), bootimage.Skip, bootimage.ReasonNotSelected, "for machinesets: mode None"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, _ *bootimage.Object) { c.Stable = false }), bootimage.Skip, bootimage.ReasonClusterNotStable, "the cluster is updating"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.OwnerReferences = []metav1.OwnerReference{{Kind: "MachinePool", Name: "hive-pool"}}
		}), bootimage.Skip, bootimage.ReasonOwnedByController, "owned by MachinePool hive-pool"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.TemplateLabels = map[string]string{bootimage.WindowsLabel: "Windows"}
		}), bootimage.Skip, bootimage.ReasonWindowsMachineSet, "Windows"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Labels = map[string]string{bootimage.OSStreamLabel: "rhel-10"}
		}), bootimage.Skip, bootimage.ReasonOSStreamNotInBootImages, "names OS stream rhel-10, but coreos-bootimages has no streams key"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, _ *bootimage.Object) { c.BootImages = nil }), bootimage.Error, bootimage.ReasonStreamMissing, "coreos-bootimages not found"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.BootImages = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-config-operator", Name: "coreos-bootimages"}, Data: map[string]string{"stream": `{"stream": 5`}}
		}), bootimage.Error, bootimage.ReasonInvalidStream, "ConfigMap openshift-machine-config-operator/coreos-bootimages key stream: not a CoreOS stream"),
		Entry(nil, configv1.AWSPlatformType, `["not", "an", "object"]`, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Error, bootimage.ReasonInvalidProviderSpec, "not a JSON object"),
		Entry(nil, configv1.AWSPlatformType, `{"ami": {"id": ""}, "placement": {"region": "us-east-1"}}`, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Error, bootimage.ReasonInvalidProviderSpec, "ami.id is empty"),
		Entry("a field of the wrong kind, in admin words", configv1.AWSPlatformType, `{"ami": "ami-0123", "placement": {"region": "us-east-1"}}`, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Error, bootimage.ReasonInvalidProviderSpec, "field ami: a string where an object is expected"),
		Entry("a nested field of the wrong kind", configv1.AWSPlatformType, `{"ami": {"id": 5}, "placement": {"region": "us-east-1"}}`, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Error, bootimage.ReasonInvalidProviderSpec, "field ami: a number at id where a string is expected"),
		Entry("GCP disks of the wrong kind", configv1.GCPPlatformType, `{"disks": {"image": "x"}}`, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Error, bootimage.ReasonInvalidProviderSpec, "where a list is expected"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Annotations = map[string]string{bootimage.ArchAnnotation: "kubernetes.io/arch=sparc64"}
		}), bootimage.Error, bootimage.ReasonInvalidArchitecture, `names architecture "sparc64"`),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Annotations = map[string]string{bootimage.ArchAnnotation: "kubernetes.io/os=linux"}
		}), bootimage.Error, bootimage.ReasonInvalidArchitecture, `has no kubernetes.io/arch=<arch> entry`),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, o *bootimage.Object) {
			c.MultiArch = true
			o.Annotations = nil
		}), bootimage.Skip, bootimage.ReasonArchitectureUnknown, "multi-architecture cluster"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Annotations = map[string]string{bootimage.ArchAnnotation: "kubernetes.io/os=linux,kubernetes.io/arch=ppc64le"}
		}), bootimage.Skip, bootimage.ReasonArchitectureNotInStream, "no ppc64le boot images"),
		Entry(nil, configv1.AzurePlatformType, azureOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Annotations = map[string]string{bootimage.ArchAnnotation: "kubernetes.io/arch=s390x"}
		}), bootimage.Skip, bootimage.ReasonUnsupportedArchitecture, "Azure has no s390x boot images"),
		Entry(nil, configv1.AWSPlatformType, `{"ami": {"arn": "arn:aws:ec2:us-east-1::image/ami-1"}, "placement": {"region": "us-east-1"}}`, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Skip, bootimage.ReasonImageNotByID, "given by ARN, not by id"),
		Entry(nil, configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-east-1", fixtures.CustomAMI), mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Skip, bootimage.ReasonCustomImage, "owned by account 123456789012"),
		// Pins the MCO's describeAMI (aws_helpers.go): an AMI EC2 does not know is an error.
		Entry("an AMI EC2 does not know in the region is an error", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-east-1", "ami-0deadbeef0000000"), mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Error, bootimage.ReasonImageNotFound, "AMI ami-0deadbeef0000000 does not exist in region us-east-1"),
		Entry("issue 20: an AMI that exists only in us-east-1, on a MachineSet in eu-central-1 (MCO describeAMI)", configv1.AWSPlatformType, fixtures.AWSProviderSpec("eu-central-1", fixtures.NewAWSAMIUSEast1), mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Error, bootimage.ReasonImageNotFound, "AMI "+fixtures.NewAWSAMIUSEast1+" does not exist in region eu-central-1"),
		Entry("the message names the stream's AMI of the region when there is one", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-west-2", fixtures.NewAWSAMIUSEast1), mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Error, bootimage.ReasonImageNotFound, "the stream's RHCOS AMI there is "+fixtures.NewAWSAMIUSWest2),
		Entry(nil, configv1.GCPPlatformType, fixtures.GCPProviderSpec("projects/redhat-marketplace-public/global/images/redhat-coreos-ocp-48-x86-64-202210040145"), mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Skip, bootimage.ReasonCustomImage, "not an RHCOS image"),
		Entry(nil, configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, "ConfidentialVM"), mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Skip, bootimage.ReasonConfidentialVM, "securityType is ConfidentialVM"),
		Entry(nil, configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.AzureImage{Publisher: "contoso", Offer: "golden", SKU: "v1", Version: "1.0.0"}, ""), mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Skip, bootimage.ReasonCustomImage, "contoso:golden:v1:1.0.0"),
		Entry(nil, configv1.AWSPlatformType, fixtures.AWSProviderSpec("ap-south-1", fixtures.OldAWSAMI), mutate(func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Cloud = &awscloud.Static{AMIs: []aws.Image{{ImageID: fixtures.OldAWSAMI, OwnerID: aws.RHCOSOwner, Region: "ap-south-1", State: "available"}}}
		}), bootimage.Skip, bootimage.ReasonRegionNotInStream, "no x86_64 AMI for region ap-south-1"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Cloud = &awscloud.Static{AMIs: fixtures.AWSImages()[:2]}
		}), bootimage.Skip, bootimage.ReasonTargetImageUnavailable, "target AMI ami-0f1e2d3c4b5a69788 is not found in us-east-1"),
		Entry(nil, configv1.VSpherePlatformType, fixtures.VSphereProviderSpec(fixtures.OldVSphereTmpl), mutate(func(*bootimage.Cluster, *bootimage.Object) {}), bootimage.Skip, bootimage.ReasonFailureDomainMismatch, "matches no vCenter and failure domain"),
		Entry("user data checked only when an update is due", configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.UserData = &bootimage.UserData{SecretName: "worker-user-data", Found: true, Data: []byte("#!/bin/bash\necho hi")}
		}), bootimage.Error, bootimage.ReasonInvalidUserData, "user-data Secret openshift-machine-api/worker-user-data: userData is not a JSON object"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.UserData = &bootimage.UserData{SecretName: "worker-user-data", Found: true, Data: []byte(`["x"]`)}
		}), bootimage.Error, bootimage.ReasonInvalidUserData, "not a JSON object"),
		Entry(nil, configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.UserData = &bootimage.UserData{SecretName: "worker-user-data", Found: true, Data: []byte(`{"ignition":{"version":"3.2.0","config":{"merge":[{"source":12}]}}}`)}
		}), bootimage.Error, bootimage.ReasonInvalidUserData, "invalid Ignition 3.2.0 config"),
		Entry("three patches remembered", configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, o *bootimage.Object) {
			o.Patched = bootimage.Attempts{Target: fixtures.NewAWSAMIUSEast1, Count: 3, Selection: bootimage.SelectionKey(c.Effective, o.Resource)}
		}), bootimage.Error, bootimage.ReasonHotLoopDetected, "refusing to reconcile machineset worker-a, hot loop detected"),
		Entry("three patches recorded", configv1.AWSPlatformType, awsOld, mutate(func(c *bootimage.Cluster, o *bootimage.Object) {
			o.Annotations = map[string]string{bootimage.AttemptsAnnotation: bootimage.Attempts{Target: fixtures.NewAWSAMIUSEast1, Count: 3, Selection: bootimage.SelectionKey(c.Effective, o.Resource)}.String()}
		}), bootimage.Error, bootimage.ReasonHotLoopDetected, "refusing to reconcile machineset worker-a, hot loop detected"),
	)

	It("is NoChange when the image is the stream's", func() {
		d := decide(configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-east-1", fixtures.NewAWSAMIUSEast1))
		Expect(d).To(And(HaveField("Action", bootimage.NoChange), HaveField("Reason", bootimage.ReasonUpToDate), HaveField("Target", fixtures.NewAWSAMIUSEast1)))
	})

	DescribeTable("updates only the image field",
		func(platform configv1.PlatformType, providerSpec string, m mutate, current, target string, imageFields func(map[string]any) []string) {
			d := decide(platform, providerSpec, m)
			Expect(d.Action).To(Equal(bootimage.Update), d.Message)
			Expect(d.Reason).To(Equal(bootimage.ReasonImageOutdated))
			Expect(d.Current).To(Equal(current))
			Expect(d.Target).To(Equal(target))
			before, after := expect.AppliedPatch(providerSpec, d)
			Expect(after).NotTo(Equal(before))
			for _, field := range imageFields(after) {
				delete(before, field)
				delete(after, field)
			}
			Expect(after).To(Equal(before), "only the image fields changed")
		},
		Entry("AWS RHCOS", configv1.AWSPlatformType, awsOld, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), fixtures.OldAWSAMI, fixtures.NewAWSAMIUSEast1,
			func(after map[string]any) []string {
				Expect(after["ami"]).To(Equal(map[string]any{"id": fixtures.NewAWSAMIUSEast1}))
				return []string{"ami"}
			}),
		Entry("AWS RHCOS in another region", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-west-2", fixtures.OldAWSAMI), mutate(func(*bootimage.Cluster, *bootimage.Object) {}), fixtures.OldAWSAMI, fixtures.NewAWSAMIUSWest2,
			func(map[string]any) []string { return []string{"ami"} }),
		Entry("AWS arm64", configv1.AWSPlatformType, awsOld, mutate(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Annotations = map[string]string{bootimage.ArchAnnotation: "kubernetes.io/arch=arm64"}
		}), fixtures.OldAWSAMI, fixtures.NewAWSAMIARM64, func(map[string]any) []string { return []string{"ami"} }),
		Entry("AWS Marketplace: the newest AMI of the product not newer than the release", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-east-1", fixtures.OldMarketplaceAMI), mutate(func(*bootimage.Cluster, *bootimage.Object) {}),
			fixtures.OldMarketplaceAMI, fixtures.NewMarketplaceAMI, func(map[string]any) []string { return []string{"ami"} }),
		Entry("GCP: the boot disk only", configv1.GCPPlatformType, gcpOld, mutate(func(*bootimage.Cluster, *bootimage.Object) {}), fixtures.OldGCPImage, fixtures.NewGCPImage,
			func(after map[string]any) []string {
				disks := after["disks"].([]any)
				Expect(disks[0].(map[string]any)["image"]).To(Equal(fixtures.NewGCPImage))
				Expect(disks[1].(map[string]any)["image"]).To(Equal("projects/my-project/global/images/data-disk"))
				disks[0].(map[string]any)["image"] = fixtures.OldGCPImage
				return nil
			}),
		Entry("Azure no-purchase-plan Gen2", configv1.AzurePlatformType, azureOld, mutate(func(*bootimage.Cluster, *bootimage.Object) {}),
			"azureopenshift:aro4:aro_416_v2:416.94.20240701", "azureopenshift:aro4:aro_420_v2:420.96.20250523", func(map[string]any) []string { return []string{"image"} }),
		Entry("Azure no-purchase-plan Gen1 stays Gen1", configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.AzureImage{Publisher: "azureopenshift", Offer: "aro4", SKU: "aro_416", Version: "416.94.20240701", Type: "MarketplaceNoPlan"}, ""), mutate(func(*bootimage.Cluster, *bootimage.Object) {}),
			"azureopenshift:aro4:aro_416:416.94.20240701", "azureopenshift:aro4:aro_420:420.96.20250523", func(map[string]any) []string { return []string{"image"} }),
		Entry("Azure paid OCP, with plan", configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.AzureImage{Publisher: "redhat", Offer: "rh-ocp-worker", SKU: "rh-ocp-worker_v2", Version: "4.16.2024", Type: "MarketplaceWithPlan"}, ""), mutate(func(*bootimage.Cluster, *bootimage.Object) {}),
			"redhat:rh-ocp-worker:rh-ocp-worker_v2:4.16.2024", "redhat:rh-ocp-worker:rh-ocp-worker_v2:420.96.20250523",
			func(after map[string]any) []string {
				Expect(after["image"]).To(HaveKeyWithValue("type", "MarketplaceWithPlan"))
				return []string{"image"}
			}),
		Entry("Azure paid OPP EMEA Gen1", configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.AzureImage{Publisher: "redhat-limited", Offer: "rh-opp-worker", SKU: "rh-opp-worker-gen1", Version: "4.16.2024", Type: "MarketplaceWithPlan"}, ""), mutate(func(*bootimage.Cluster, *bootimage.Object) {}),
			"redhat-limited:rh-opp-worker:rh-opp-worker-gen1:4.16.2024", "redhat-limited:rh-opp-worker:rh-opp-worker:420.96.20250523", func(map[string]any) []string { return []string{"image"} }),
		Entry("Azure installer upload moves to the marketplace", configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.AzureImage{ResourceID: "/resourceGroups/demo-x7k2p-rg/providers/Microsoft.Compute/galleries/gallery_demo_x7k2p/images/demo-x7k2p-gen2/versions/latest"}, ""), mutate(func(*bootimage.Cluster, *bootimage.Object) {}),
			"/resourceGroups/demo-x7k2p-rg/providers/Microsoft.Compute/galleries/gallery_demo_x7k2p/images/demo-x7k2p-gen2/versions/latest", "azureopenshift:aro4:aro_420_v2:420.96.20250523",
			func(after map[string]any) []string {
				Expect(after["image"]).To(HaveKeyWithValue("resourceID", ""))
				return []string{"image"}
			}),
	)

	It("upgrades a spec 2 user-data stub when an update is due", func() {
		d := decide(configv1.AWSPlatformType, awsOld, func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.UserData = &bootimage.UserData{SecretName: "worker-user-data", Found: true, Data: []byte(fixtures.IgnitionStubV2)}
		})
		Expect(d.Action).To(Equal(bootimage.Update))
		Expect(d.UserDataVersion).To(Equal("2.2.0"))
		Expect(string(d.UserData)).To(MatchJSON(`{"ignition":{"config":{"merge":[{"source":"https://api-int.demo.example.com:22623/config/worker","verification":{}}],"replace":{"verification":{}}},"proxy":{},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,LS0tLS1CRUdJTi==","verification":{}}]}},"timeouts":{},"version":"3.2.0"}}`))
	})

	It("leaves a spec 3 stub alone", func() {
		d := decide(configv1.AWSPlatformType, awsOld, func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.UserData = &bootimage.UserData{SecretName: "worker-user-data", Found: true, Data: []byte(fixtures.IgnitionStubV3)}
		})
		Expect(d.Action).To(Equal(bootimage.Update))
		Expect(d.UserData).To(BeNil())
	})
})

type errString string

func (e errString) Error() string { return string(e) }
