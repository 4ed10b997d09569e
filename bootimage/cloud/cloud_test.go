package cloud_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/gcpcloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

func TestCloud(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "cloud: the real SDKs against local endpoints speaking the wire protocols")
}

var ctx = context.Background()

// staticKeysEC2 is an EC2 catalogue of server with static keys.
func staticKeysEC2(server *fakecloud.EC2) *awscloud.EC2 {
	return &awscloud.EC2{Metrics: testMetrics, TTL: time.Minute, RootCAs: server.RootCAs(), Settings: func(context.Context) (awscloud.Settings, error) {
		return awscloud.Settings{Version: "1", AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", Endpoint: server.URL}, nil
	}}
}

var _ = Describe("EC2 through aws-sdk-go-v2", func() {
	var server *fakecloud.EC2
	var ec2 *awscloud.EC2
	BeforeEach(func() {
		server = fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(server.Close)
		ec2 = staticKeysEC2(server)
	})

	It("describes an AMI by id in its region", func() {
		img, err := ec2.Image(ctx, "us-west-2", fixtures.NewAWSAMIUSWest2)
		Expect(err).NotTo(HaveOccurred())
		Expect(*img).To(Equal(aws.Image{ImageID: fixtures.NewAWSAMIUSWest2, OwnerID: aws.RHCOSOwner, Name: "rhcos-9.6.20250523-0-x86_64", Description: "rhcos-9.6.20250523-0-x86_64", CreationDate: "2025-05-23T12:00:00.000Z", Region: "us-west-2", State: "available"}))
	})

	It("answers nil for an AMI EC2 does not know (InvalidAMIID.NotFound)", func() {
		img, err := ec2.Image(ctx, "us-east-1", "ami-0deadbeef0000000")
		Expect(err).NotTo(HaveOccurred())
		Expect(img).To(BeNil())
	})

	It("lists the marketplace AMIs of a product", func() {
		imgs, err := ec2.MarketplaceImages(ctx, "us-east-1", fixtures.MarketplaceProduct)
		Expect(err).NotTo(HaveOccurred())
		Expect(imgs).To(HaveLen(3))
	})

	It("caches results for the TTL", func() {
		for range 3 {
			_, err := ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(server.Calls.Load()).To(BeEquivalentTo(1))
	})

	It("drives a whole decision", func() {
		d, err := bootimage.Decide(ctx, awsCluster(ec2), bootimage.MachineSetObject(fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.OldMarketplaceAMI))))
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Action).To(Equal(bootimage.Update), d.Message)
		Expect(d.Target).To(Equal(fixtures.NewMarketplaceAMI))
	})

	It("says when there are no credentials", func() {
		none := &awscloud.EC2{Metrics: testMetrics, Settings: func(context.Context) (awscloud.Settings, error) { return awscloud.Settings{}, bootimage.ErrNoCatalog }}
		_, err := none.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
		Expect(err).To(MatchError(bootimage.ErrNoCatalog))
	})
})

var _ = Describe("GCP compute through cloud.google.com/go/compute", func() {
	var server *fakecloud.Compute
	var compute *gcpcloud.Images
	BeforeEach(func() {
		server = fakecloud.NewCompute([]fakecloud.ComputeImage{
			{Project: "rhcos-cloud", Name: fixtures.NewGCPImageName},
			{Project: "rhcos-cloud", Name: "rhcos-old", Deprecation: "DEPRECATED"},
		})
		DeferCleanup(server.Close)
		compute = &gcpcloud.Images{Metrics: testMetrics, Settings: func(context.Context) (gcp.Settings, error) {
			return gcp.Settings{Version: "1", Token: "test-token", Endpoint: server.URL}, nil
		}}
	})

	It("gets an image and its deprecation", func() {
		img, err := compute.Image(ctx, "rhcos-cloud", fixtures.NewGCPImageName)
		Expect(err).NotTo(HaveOccurred())
		Expect(img).To(Equal(&gcp.Image{Name: fixtures.NewGCPImageName}))
		old, err := compute.Image(ctx, "rhcos-cloud", "rhcos-old")
		Expect(err).NotTo(HaveOccurred())
		Expect(old.Deprecation).To(Equal("DEPRECATED"))
	})

	It("answers nil for a missing image (HTTP 404)", func() {
		img, err := compute.Image(ctx, "rhcos-cloud", "nope")
		Expect(err).NotTo(HaveOccurred())
		Expect(img).To(BeNil())
	})

	It("skips the pre-flight without credentials, refuses a missing target with them", func() {
		ms := bootimage.MachineSetObject(fixtures.MachineSet("w", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))
		cluster := gcpCluster(&gcpcloud.Images{Metrics: testMetrics, Settings: func(context.Context) (gcp.Settings, error) { return gcp.Settings{}, bootimage.ErrNoCatalog }})
		d, err := bootimage.Decide(ctx, cluster, ms)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Action).To(Equal(bootimage.Update))

		empty := fakecloud.NewCompute(nil)
		defer empty.Close()
		cluster.Cloud = &gcpcloud.Images{Metrics: testMetrics, Settings: func(context.Context) (gcp.Settings, error) {
			return gcp.Settings{Token: "t", Endpoint: empty.URL}, nil
		}}
		d, err = bootimage.Decide(ctx, cluster, ms)
		Expect(err).NotTo(HaveOccurred())
		Expect(d).To(And(HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonTargetImageUnavailable)))
		Expect(d.Message).To(ContainSubstring("does not exist"))
	})
})
