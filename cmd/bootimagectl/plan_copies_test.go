package main

import (
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

var _ = Describe("bootimagectl plan in a region the stream lacks", func() {
	const region = "ap-south-1"
	byFilter := fixtures.AWSProviderSpecByFilter(region, "demo-x7k2p")
	// describeImages writes, as `aws ec2 describe-images` prints them, the installer's copy of
	// the old AMI and, when pendingCopy is set, a copy of the stream's AMI under way.
	describeImages := func(pendingCopy string) string {
		tag := func(k, v string) map[string]string { return map[string]string{"Key": k, "Value": v} }
		images := []map[string]any{{
			"ImageId": "ami-0installer0000001", "OwnerId": "123456789012", "State": "available", "CreationDate": "2024-07-01T00:00:00.000Z",
			"Tags": []map[string]string{tag("Name", "demo-x7k2p-ami-"+region), tag("kubernetes.io/cluster/demo-x7k2p", "owned"),
				tag("sourceAMI", fixtures.OldAWSAMI), tag("sourceRegion", "us-east-1")},
		}}
		if pendingCopy != "" {
			images = append(images, map[string]any{
				"ImageId": pendingCopy, "OwnerId": "123456789012", "State": "pending", "CreationDate": "2026-12-04T10:00:00.000Z",
				"Tags": []map[string]string{tag("kubernetes.io/cluster/demo-x7k2p", "owned"), tag("sourceAMI", fixtures.NewAWSAMIUSEast1), tag("sourceRegion", "us-east-1")},
			})
		}
		p := filepath.Join(GinkgoT().TempDir(), "describe-images.json")
		data, err := json.Marshal(map[string]any{"Images": images})
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(p, data, 0o600)).To(Succeed())
		return p
	}
	write := func() string {
		dir := GinkgoT().TempDir()
		writeYAML(filepath.Join(dir, "cluster.yaml"), append(planCluster()[:1:1],
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, nil, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
			fixtures.MachineSet("worker-a", byFilter), fixtures.MachineSet("worker-b", byFilter))...)
		return dir
	}

	It("says which copy the operator makes, and which objects boot it", func() {
		dir := write()
		code, out, stderr := runCLI("plan", "-f", dir, "--aws-images", describeImages(""), "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0), out)
		p := parsePlan(out)
		Expect(p.Items).To(HaveEach(And(HaveField("Action", bootimage.Update), HaveField("Current", "tag:Name=demo-x7k2p-ami-ap-south-1 (ami-0installer0000001)"))))
		Expect(p.Copies).To(ConsistOf(PlannedCopy{SourceAMI: fixtures.NewAWSAMIUSEast1, SourceRegion: "us-east-1", Region: region, Arch: "x86_64",
			Release: fixtures.StreamRelease, OSStream: "rhel-9", Objects: []string{"machineset/worker-a", "machineset/worker-b"}}))

		_, table, _ := runCLI("plan", "-f", dir, "--aws-images", describeImages(""))
		Expect(table).To(ContainSubstring("Copy of " + fixtures.NewAWSAMIUSEast1 + " from us-east-1 into ap-south-1 (x86_64, RHCOS " + fixtures.StreamRelease + ", rhel-9), to be made, then booted by machineset/worker-a, machineset/worker-b\n"))
	})

	It("shows a copy under way as pending, not as one to make", func() {
		_, out, _ := runCLI("plan", "-f", write(), "--aws-images", describeImages("ami-0c0000000000000a1"), "-o", "json")
		Expect(parsePlan(out).Copies).To(ConsistOf(HaveField("ImageID", "ami-0c0000000000000a1")))
	})
})
