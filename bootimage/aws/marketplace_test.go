package aws_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// Red Hat AWS Marketplace products, as the MCO's tests name them.
const (
	ocpX86   = "59ead7de-2540-4653-a8b0-fa7926d5c845"
	ocpARM64 = "abc249f8-7440-45f7-a4b1-c026baff64c1"
)

// marketplaceAMI is an AMI of product in us-east-1 as EC2 lists it: named like the marketplace
// names it, the RHCOS release in its description.
func marketplaceAMI(id, product, description, created string) aws.Image {
	return aws.Image{
		ImageID: id, OwnerID: aws.MarketplaceOwner, Name: "RHEL-9.4-RHCOS-9.x_HVM_GA-" + created[:10] + "-x86_64-0-" + product,
		Description: description, CreationDate: created, Region: "us-east-1", State: "available",
	}
}

func pending(img aws.Image) aws.Image {
	img.State = "pending"
	return img
}

// marketplaceCase is one row of the marketplace selection. The first AMI is the MachineSet's.
type marketplaceCase struct {
	release string // the stream's artifacts.aws.release for the MachineSet's arch
	arch    string // the MachineSet's architecture annotation; amd64 when empty
	amis    []aws.Image
	action  bootimage.Action
	reason  string
	target  string
	version string // Decision.BootImageVersion
	message string
}

var _ = Describe("AWS Marketplace selection", func() {
	// The MachineSet's AMI in most rows: RHCOS 9.4, older than every stream below.
	current := marketplaceAMI("ami-current", ocpX86, "RHEL CoreOS 9.4 9.4.20250101-0 x86_64", "2025-01-01T00:00:00.000Z")

	DescribeTable("the MCO's table rows (pkg/controller/bootimage/aws_helpers_test.go, marketplace/marketplace_test.go)",
		func(c marketplaceCase) {
			cluster := fixtures.DecisionCluster(configv1.AWSPlatformType)
			stream := fixtures.Stream()
			rpm := map[string]string{"": "x86_64", "amd64": "x86_64", "arm64": "aarch64"}[c.arch]
			arch := stream.Architectures[rpm]
			aws := arch.Artifacts["aws"]
			aws.Release = c.release
			arch.Artifacts["aws"] = aws
			cluster.BootImages = fixtures.BootImagesConfigMap(stream, "4.20.3")
			cluster.Cloud = &awscloud.Static{AMIs: c.amis}
			obj := fixtures.DecisionMachineSet(fixtures.AWSProviderSpec("us-east-1", c.amis[0].ImageID))
			if c.arch != "" {
				obj.Annotations = map[string]string{bootimage.ArchAnnotation: "kubernetes.io/arch=" + c.arch}
			}

			d, err := bootimage.Decide(context.Background(), cluster, obj)

			Expect(err).NotTo(HaveOccurred())
			Expect(d).To(And(HaveField("Action", c.action), HaveField("Reason", c.reason), HaveField("Target", c.target), HaveField("BootImageVersion", c.version)), d.Message)
			Expect(d.Message).To(ContainSubstring(c.message))
			if c.action == bootimage.Update {
				Expect(d.ProviderSpecPatch).To(Equal([]bootimage.PatchOp{{Op: "add", Path: "/ami/id", Value: c.target}}))
			} else {
				Expect(d.ProviderSpecPatch).To(BeNil())
			}
		},
		Entry("single target (TestFindMarketplaceAMI: single AMI at target version selected)", marketplaceCase{
			release: "9.6.20260210-0",
			amis:    []aws.Image{current, marketplaceAMI("ami-target", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-10T00:00:00.000Z")},
			action:  bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-target", version: "9.6.20260210-0",
			message: "the best marketplace AMI of product " + ocpX86 + " (OCP x86_64) for the stream's RHCOS 9.6 in us-east-1 is ami-target (RHCOS 9.6.20260210-0)",
		}),
		Entry("newer than target discarded (TestFindMarketplaceAMI: AMI newer than target is discarded)", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{current,
				marketplaceAMI("ami-too-new", ocpX86, "RHEL CoreOS 9.7 9.7.20260601-0 x86_64", "2026-06-01T00:00:00.000Z"),
				marketplaceAMI("ami-good", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-10T00:00:00.000Z")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-good", version: "9.6.20260210-0",
		}),
		Entry("fallback one minor older (TestFindMarketplaceAMI: fallback to older version when target not yet available)", marketplaceCase{
			release: "9.6.20260210-0",
			amis:    []aws.Image{current, marketplaceAMI("ami-older", ocpX86, "RHEL CoreOS 9.5 9.5.20251001-0 x86_64", "2025-10-01T00:00:00.000Z")},
			action:  bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-older", version: "9.5.20251001-0",
			message: "RHCOS 9.6 is not yet published in us-east-1, so the newest older release is used until it is",
		}),
		Entry("tie by creation date (TestFindMarketplaceAMI: tie-breaking by newest CreationDate)", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{current,
				marketplaceAMI("ami-later", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-10T00:00:00.000Z"),
				marketplaceAMI("ami-earlier", ocpX86, "RHEL CoreOS 9.6 9.6.20260110-0 x86_64", "2026-01-10T00:00:00.000Z")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-later", version: "9.6.20260210-0",
		}),
		Entry("highest version wins (TestFindMarketplaceAMI: highest version preferred over newer creation date of older version)", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{current,
				marketplaceAMI("ami-9-5-newer", ocpX86, "RHEL CoreOS 9.5 9.5.20260101-0 x86_64", "2026-01-01T00:00:00.000Z"),
				marketplaceAMI("ami-9-6-older", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2025-12-01T00:00:00.000Z")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-9-6-older", version: "9.6.20260210-0",
		}),
		Entry("unparseable description (TestFindMarketplaceAMI: AMI with unparseable description is skipped)", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{current,
				marketplaceAMI("ami-bad-desc", ocpX86, "no version here", "2026-03-10T00:00:00.000Z"),
				marketplaceAMI("ami-good", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-10T00:00:00.000Z")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-good", version: "9.6.20260210-0",
		}),
		Entry("no AMI at or below the target (TestFindMarketplaceAMI: no AMIs available returns empty result); one not yet available", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{marketplaceAMI("ami-current", ocpX86, "RHEL CoreOS 9.7 9.7.20260601-0 x86_64", "2026-06-01T00:00:00.000Z"),
				pending(marketplaceAMI("ami-pending", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-10T00:00:00.000Z"))},
			action: bootimage.Skip, reason: bootimage.ReasonTargetImageUnavailable,
			message: "no available marketplace AMI of product " + ocpX86 + " (OCP x86_64) with RHCOS 9.6 or older in us-east-1 (2 listed)",
		}),
		Entry("current is best (reconcileAWSProviderSpec: newAMI == currentAMI, no patch)", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{marketplaceAMI("ami-current", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-10T00:00:00.000Z"),
				marketplaceAMI("ami-earlier", ocpX86, "RHEL CoreOS 9.6 9.6.20260110-0 x86_64", "2026-01-10T00:00:00.000Z")},
			action: bootimage.NoChange, reason: bootimage.ReasonUpToDate, target: "ami-current", version: "9.6.20260210-0",
			message: "AMI ami-current (RHCOS 9.6.20260210-0) is the best marketplace AMI of product",
		}),
		Entry("current is the best while the target is not yet in the region (no upstream row)", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{marketplaceAMI("ami-current", ocpX86, "RHEL CoreOS 9.5 9.5.20251001-0 x86_64", "2025-10-01T00:00:00.000Z"),
				marketplaceAMI("ami-older", ocpX86, "RHEL CoreOS 9.4 9.4.20250101-0 x86_64", "2025-01-01T00:00:00.000Z")},
			action: bootimage.NoChange, reason: bootimage.ReasonUpToDate, target: "ami-current", version: "9.5.20251001-0",
			message: "RHCOS 9.6 is not yet published in us-east-1",
		}),
		Entry("ROSA (TestDetectAMIKind: marketplace ROSA AMI; TestExtractVersionFromDescription: ROSA format)", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{marketplaceAMI("ami-rosa-old", aws.ROSAMarketplaceProduct, "rhcos-9.4.20250101-0-x86_64", "2025-01-01T00:00:00.000Z"),
				marketplaceAMI("ami-rosa", aws.ROSAMarketplaceProduct, "rhcos-9.6.20250701-0-x86_64", "2025-07-01T00:00:00.000Z"),
				marketplaceAMI("ami-ocp", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-10T00:00:00.000Z")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-rosa", version: "9.6.20250701-0",
			message: "product " + aws.ROSAMarketplaceProduct + " (ROSA)",
		}),
		Entry("double-digit minor (TestMarketplaceVersionToken: double-digit minor)", marketplaceCase{
			release: "9.10.20270110-0",
			amis: []aws.Image{current,
				marketplaceAMI("ami-9-9", ocpX86, "RHEL CoreOS 9.9 9.9.20261201-0 x86_64", "2026-12-01T00:00:00.000Z"),
				marketplaceAMI("ami-9-10", ocpX86, "RHEL CoreOS 9.10 9.10.20270110-0 x86_64", "2026-11-01T00:00:00.000Z"),
				marketplaceAMI("ami-9-11", ocpX86, "RHEL CoreOS 9.11 9.11.20270601-0 x86_64", "2027-06-01T00:00:00.000Z")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-9-10", version: "9.10.20270110-0",
		}),
		Entry("arm64 product (TestExtractProductID: OCP arm64 AMI; TestExtractVersionFromDescription: RHEL marketplace format aarch64)", marketplaceCase{
			release: "9.6.20260210-0", arch: "arm64",
			amis: []aws.Image{marketplaceAMI("ami-arm-old", ocpARM64, "RHEL CoreOS 9.4 9.4.20250101-0 aarch64", "2025-01-01T00:00:00.000Z"),
				marketplaceAMI("ami-arm", ocpARM64, "RHEL CoreOS 9.6 9.6.20260210-0 aarch64", "2026-02-10T00:00:00.000Z"),
				marketplaceAMI("ami-x86", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-11T00:00:00.000Z")},
			action: bootimage.Update, reason: bootimage.ReasonImageOutdated, target: "ami-arm", version: "9.6.20260210-0",
			message: "product " + ocpARM64 + " (OCP arm64)",
		}),
		Entry("only pre-4.19 AMIs (TestFindMarketplaceAMI: only pre-RHEL-aligned AMIs returns empty result with warning)", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{marketplaceAMI("ami-old-format", ocpX86, "OpenShift 4.18 418.94.202511191518-0 x86_64", "2025-11-19T15:18:00.000Z"),
				marketplaceAMI("ami-older-format", ocpX86, "OpenShift 4.17 417.94.202501010000-0 x86_64", "2025-01-01T00:00:00.000Z")},
			action: bootimage.Skip, reason: bootimage.ReasonTargetImageUnavailable,
			message: "marketplace product " + ocpX86 + " (OCP x86_64) has only pre-4.19 AMIs (OCP-numbered RHCOS releases such as 418.94) in us-east-1",
		}),
		Entry("no product id (TestDetectAMIKind: marketplace AMI with no product ID in name)", marketplaceCase{
			release: "9.6.20260210-0",
			amis: []aws.Image{{ImageID: "ami-no-product", OwnerID: aws.MarketplaceOwner, Name: "some-image-without-a-uuid", Description: "RHEL CoreOS 9.4 9.4.20250101-0 x86_64", Region: "us-east-1", State: "available"},
				marketplaceAMI("ami-target", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-10T00:00:00.000Z")},
			action: bootimage.Skip, reason: bootimage.ReasonCustomImage,
			message: `marketplace AMI ami-no-product has no product id at the end of its name "some-image-without-a-uuid"`,
		}),
		Entry("a stream from before OCP 4.19 (no upstream row: the MCO's feature starts at 4.19)", marketplaceCase{
			release: "418.94.202511191518-0",
			amis:    []aws.Image{current, marketplaceAMI("ami-target", ocpX86, "RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "2026-02-10T00:00:00.000Z")},
			action:  bootimage.Skip, reason: bootimage.ReasonTargetImageUnavailable,
			message: "the stream's RHCOS 418.94.202511191518-0 predates OCP 4.19",
		}),
	)

	DescribeTable("the product id is the UUID at the end of the name (TestExtractProductID)",
		func(name, product string) { Expect(aws.MarketplaceProductID(name)).To(Equal(product)) },
		Entry("OCP x86_64 AMI", "RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-"+ocpX86, ocpX86),
		Entry("OCP arm64 AMI", "RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-aarch64-0-"+ocpARM64, ocpARM64),
		Entry("ROSA AMI", "RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-"+aws.ROSAMarketplaceProduct, aws.ROSAMarketplaceProduct),
		Entry("standard RHCOS AMI has no product ID", "rhcos-419-94-202504151514-0-x86_64", ""),
		Entry("name too short", "short", ""),
		Entry("trailing segment not a UUID", "RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-notauuid", ""),
		Entry("a UUID inside, not at the end", "RHEL-9.4-"+ocpX86+"-x86_64", ""),
		Entry("empty name", "", ""),
	)

	It("reports the stream's release as the boot image version of a standard RHCOS AMI", func() {
		d, err := bootimage.Decide(context.Background(), fixtures.DecisionCluster(configv1.AWSPlatformType),
			fixtures.DecisionMachineSet(fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Action).To(Equal(bootimage.Update))
		Expect(d.BootImageVersion).To(Equal(fixtures.StreamRelease))
	})
})
