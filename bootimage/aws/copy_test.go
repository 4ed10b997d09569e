package aws_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

const (
	infraID = "demo-x7k2p"
	// lacking is a region the rhel-9 stream has no AMI for.
	lacking = "ap-south-1"
)

// clusterCopy is an image of this cluster's account in region, copied from source.
func clusterCopy(id, region, source, state, created string, extra ...string) aws.Image {
	tags := map[string]string{aws.OwnedTag(infraID): "owned", aws.TagSourceAMI: source, aws.TagSourceRegion: "us-east-1"}
	for i := 0; i+1 < len(extra); i += 2 {
		tags[extra[i]] = extra[i+1]
	}
	return aws.Image{ImageID: id, OwnerID: "123456789012", Name: infraID + "-master", CreationDate: created, Region: region, State: state, Tags: tags}
}

// installerCopy is the installer's copy of the old AMI in region, named for its filter.
func installerCopy(region string) aws.Image {
	return clusterCopy("ami-0installer0000001", region, fixtures.OldAWSAMI, "available", "2024-07-01T00:00:00.000Z", aws.TagName, aws.InstallerCopyName(infraID, region))
}

type copyCase struct {
	spec    string
	extra   []aws.Image
	mutate  []fixtures.Mutation
	action  bootimage.Action
	reason  string
	target  string
	copies  bool   // the decision asks for a copy
	pending string // the copy under way it waits for
	message string
}

func decideCopy(c copyCase) bootimage.Decision {
	cluster := fixtures.DecisionCluster(configv1.AWSPlatformType)
	cluster.Infrastructure = fixtures.Infrastructure(configv1.AWSPlatformType)
	cluster.Cloud = &awscloud.Static{AMIs: append(fixtures.AWSImages(), c.extra...)}
	obj := fixtures.DecisionMachineSet(c.spec)
	for _, m := range c.mutate {
		m(&cluster, &obj)
	}
	d, err := bootimage.Decide(context.Background(), cluster, obj)
	Expect(err).NotTo(HaveOccurred())
	return d
}

var _ = Describe("The installer's AMI copy", func() {
	byFilter := fixtures.AWSProviderSpecByFilter(lacking, infraID)
	newCopy := func(state string) aws.Image {
		return clusterCopy("ami-0c0000000000000a1", lacking, fixtures.NewAWSAMIUSEast1, state, "2026-12-04T10:00:00.000Z")
	}
	DescribeTable("is kept current; nothing else is taken for it",
		func(c copyCase) {
			d := decideCopy(c)
			Expect(d.Action).To(Equal(c.action), d.Message)
			Expect(d.Reason).To(Equal(c.reason), d.Message)
			Expect(d.Target).To(Equal(c.target))
			Expect(d.Message).To(ContainSubstring(c.message))
			cp := aws.CopyOf(d)
			Expect(cp != nil).To(Equal(c.copies), "a copy asked for")
			if cp != nil {
				Expect(cp.ImageID).To(Equal(c.pending))
				Expect(d.ProviderSpecPatch).To(BeEmpty(), "nothing is patched before the copy is available")
			}
		},
		Entry("the installer's filter, no copy yet: copy the stream's us-east-1 AMI", copyCase{
			spec: byFilter, extra: []aws.Image{installerCopy(lacking)},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "copy of " + fixtures.NewAWSAMIUSEast1, copies: true,
			message: "copying its us-east-1 AMI " + fixtures.NewAWSAMIUSEast1,
		}),
		Entry("a copy pending: wait for it", copyCase{
			spec: byFilter, extra: []aws.Image{installerCopy(lacking), newCopy("pending")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-0c0000000000000a1", copies: true, pending: "ami-0c0000000000000a1",
			message: "is pending",
		}),
		Entry("a copy available: boot it, by id", copyCase{
			spec: byFilter, extra: []aws.Image{installerCopy(lacking), newCopy("available")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-0c0000000000000a1",
			message: "ami-0c0000000000000a1 is a copy of the stream's us-east-1 AMI",
		}),
		Entry("a copy failed: an Error that says how to start again", copyCase{
			spec: byFilter, extra: []aws.Image{installerCopy(lacking), newCopy("failed")},
			action: bootimage.Error, reason: bootimage.ReasonCopyFailed, message: "deregister-image",
		}),
		Entry("the filter's image is a copy of the stream's AMI already", copyCase{
			spec: byFilter, extra: []aws.Image{clusterCopy("ami-0installer0000001", lacking, fixtures.NewAWSAMIUSEast1, "available", "2025-06-01T00:00:00.000Z", aws.TagName, aws.InstallerCopyName(infraID, lacking))},
			action: bootimage.NoChange, reason: bootimage.ReasonUpToDate, target: "tag:Name=demo-x7k2p-ami-ap-south-1 (ami-0installer0000001)",
		}),
		Entry("an ami.id naming an outdated copy of this cluster", copyCase{
			spec: fixtures.AWSProviderSpec(lacking, "ami-0c0000000000000a0"), extra: []aws.Image{clusterCopy("ami-0c0000000000000a0", lacking, fixtures.OldAWSAMI, "available", "2024-07-01T00:00:00.000Z")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "copy of " + fixtures.NewAWSAMIUSEast1, copies: true,
		}),
		Entry("an ami.id naming a copy of the stream's AMI", copyCase{
			spec: fixtures.AWSProviderSpec(lacking, "ami-0c0000000000000a1"), extra: []aws.Image{newCopy("available")},
			action: bootimage.NoChange, reason: bootimage.ReasonUpToDate, target: "ami-0c0000000000000a1",
		}),
		Entry("another cluster's copy is custom", copyCase{
			spec: fixtures.AWSProviderSpec(lacking, "ami-0other0000000001"), extra: []aws.Image{{ImageID: "ami-0other0000000001", OwnerID: "123456789012", Region: lacking, State: "available",
				Tags: map[string]string{aws.OwnedTag("other-cluster"): "owned", aws.TagSourceAMI: fixtures.OldAWSAMI, aws.TagSourceRegion: "us-east-1"}}},
			action: bootimage.Skip, reason: bootimage.ReasonCustomImage,
		}),
		Entry("an image of the account without the copy's tags is custom", copyCase{
			spec: fixtures.AWSProviderSpec(lacking, "ami-0mine00000000001"), extra: []aws.Image{{ImageID: "ami-0mine00000000001", OwnerID: "123456789012", Region: lacking, State: "available",
				Tags: map[string]string{aws.OwnedTag(infraID): "owned"}}},
			action: bootimage.Skip, reason: bootimage.ReasonCustomImage,
		}),
		Entry("a filter other than the installer's is left alone", copyCase{
			spec:   fixtures.AWSProviderSpecByFilter(lacking, "another-infra"),
			action: bootimage.Skip, reason: bootimage.ReasonImageNotByID,
		}),
		Entry("the stream gained the region: the stream's AMI, by id", copyCase{
			spec: fixtures.AWSProviderSpecByFilter("eu-west-1", infraID), extra: []aws.Image{installerCopy("eu-west-1"),
				{ImageID: "ami-0e1e1e1e1e1e1e1e1", OwnerID: aws.RHCOSOwner, Region: "eu-west-1", State: "available"}},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-0e1e1e1e1e1e1e1e1", message: "the stream now has",
		}),
		Entry("GovCloud: no copies outside the standard partition", copyCase{
			spec:   fixtures.AWSProviderSpecByFilter("us-gov-west-1", infraID),
			action: bootimage.Skip, reason: bootimage.ReasonRegionNotInStream, message: "standard aws partition",
		}),
		Entry("rhel-10 in eu-west-1: a copy of the rhel-10 stream's us-east-1 AMI, never rhel-9's", copyCase{
			spec: fixtures.AWSProviderSpecByFilter("eu-west-1", infraID), extra: []aws.Image{installerCopy("eu-west-1")},
			mutate: []fixtures.Mutation{func(c *bootimage.Cluster, _ *bootimage.Object) {
				c.BootImages = fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion)
			}, fixtures.OSStreamLabelled(fixtures.OSStreamRHEL10)},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "copy of " + fixtures.RHEL10AWSAMIUSEast1, copies: true,
		}),
	)

	It("asks for a copy as the installer makes it, tagged so that destroy cluster removes it", func() {
		d := decideCopy(copyCase{spec: byFilter, extra: []aws.Image{installerCopy(lacking)}})
		cp := aws.CopyOf(d)
		Expect(cp).NotTo(BeNil())
		Expect(*cp).To(MatchFields(IgnoreExtras, Fields{
			"Region": Equal(lacking), "SourceRegion": Equal("us-east-1"), "SourceAMI": Equal(fixtures.NewAWSAMIUSEast1), "Arch": Equal("x86_64"),
		}))
		Expect(cp.Tags).To(HaveKeyWithValue("kubernetes.io/cluster/"+infraID, "owned"))
		Expect(cp.Tags).To(HaveKeyWithValue(aws.TagSourceAMI, fixtures.NewAWSAMIUSEast1))
		Expect(cp.Tags).To(HaveKeyWithValue(aws.TagSourceRegion, "us-east-1"))
		Expect(cp.Tags).To(HaveKeyWithValue(aws.TagCopiedBy, "bootimage-operator"))
		Expect(cp.Tags).To(HaveKeyWithValue(aws.TagRHCOSVersion, fixtures.StreamRelease))
		Expect(cp.Tags[aws.TagName]).NotTo(Equal(aws.InstallerCopyName(infraID, lacking)), "the installer's filter must not find it: that would move objects not selected")
		again := aws.CopyOf(decideCopy(copyCase{spec: byFilter, extra: []aws.Image{installerCopy(lacking)}}))
		Expect(again.ClientToken).To(Equal(cp.ClientToken), "one token per copy, so EC2 makes it once")
		Expect(len(cp.ClientToken)).To(BeNumerically("<=", 64), "EC2's limit")
	})

	It("is an Error once a copy stays pending past the deadline", func() {
		d := decideCopy(copyCase{spec: byFilter, extra: []aws.Image{installerCopy(lacking), newCopy("pending")}})
		started := aws.CopyOf(d).Started
		_, overdue := aws.CopyOverdue(d, started.Add(aws.CopyDeadline-time.Minute))
		Expect(overdue).To(BeFalse())
		late, overdue := aws.CopyOverdue(d, started.Add(aws.CopyDeadline+time.Minute))
		Expect(overdue).To(BeTrue())
		Expect(late.Action).To(Equal(bootimage.Error))
		Expect(late.Reason).To(Equal(bootimage.ReasonCopyFailed))
	})

	It("says which right a refused copy lacks, and where it is granted", func() {
		d := decideCopy(copyCase{spec: byFilter, extra: []aws.Image{installerCopy(lacking)}})
		refused, ok := aws.CopyRefused(d, "UnauthorizedOperation", "You are not authorized to perform this operation.")
		Expect(ok).To(BeTrue())
		Expect(refused.Action).To(Equal(bootimage.Skip))
		Expect(refused.Reason).To(Equal(bootimage.ReasonCopyNotPermitted))
		Expect(refused.Message).To(And(ContainSubstring("ec2:CopyImage"), ContainSubstring(aws.CredentialsRequest)))
		Expect(refused.LeftBehind()).To(BeTrue(), "counted for skew")
		_, ok = aws.CopyRefused(d, "RequestLimitExceeded", "slow down")
		Expect(ok).To(BeFalse(), "throttling is retried")
	})
})
