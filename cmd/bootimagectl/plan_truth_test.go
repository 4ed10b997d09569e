package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// One decision for the CLI and the operator: the same inputs, taken the same way, and every
// missing one named.
var _ = Describe("bootimagectl plan takes its inputs as the operator does", func() {
	var dir string
	// write puts objs and the plan's MachineSets into dir/cluster.yaml.
	write := func(objs ...client.Object) {
		GinkgoHelper()
		writeYAML(filepath.Join(dir, "cluster.yaml"), append(objs, planMachineSets()...)...)
	}
	BeforeEach(func() { dir = GinkgoT().TempDir() })
	withoutClusterVersion := func() []client.Object {
		return []client.Object{
			fixtures.Infrastructure(configv1.AWSPlatformType),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, nil, nil),
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		}
	}

	It("takes the release version from RELEASE_VERSION without a ClusterVersion, and exits 1 as the operator degrades", func() {
		write(withoutClusterVersion()...)
		code, out, stderr := runMain([]string{"RELEASE_VERSION=" + fixtures.ReleaseVersion}, "plan", "-f", dir, "--aws-images", writeAMIs(), "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(1), "BootImageUpdateDegraded: ClusterVersion/version not found")
		p := parsePlan(out)
		Expect(p.Items).To(ContainElement(And(HaveField("Name", "worker-a"), HaveField("Action", bootimage.Update))), "the gates of RELEASE_VERSION apply")
		Expect(p.Notes).To(ContainElement(HavePrefix("No ClusterVersion/version: the operator reports BootImageUpdateDegraded")))
	})

	It("without a ClusterVersion or a release version, says what would give one, truly", func() {
		write(withoutClusterVersion()...)
		code, out, _ := runMain(nil, "plan", "-f", dir, "--aws-images", writeAMIs(), "-o", "json")
		Expect(code).To(Equal(1))
		p := parsePlan(out)
		Expect(p.Items).To(ContainElement(And(HaveField("Name", "worker-a"), HaveField("Reason", bootimage.ReasonFeatureGateDisabled))))
		Expect(p.Notes).To(ContainElement(ContainSubstring("release version unknown: no --release-version or RELEASE_VERSION and ClusterVersion/version not found")))
		// The hint is true: either input plans the update.
		code, out, _ = runMain(nil, "plan", "-f", dir, "--aws-images", writeAMIs(), "-o", "json", "--release-version", fixtures.ReleaseVersion)
		Expect(code).To(Equal(1))
		Expect(parsePlan(out).Items).To(ContainElement(And(HaveField("Name", "worker-a"), HaveField("Action", bootimage.Update))))
	})

	It("names every input missing from a dump in a note instead of planning from silent defaults", func() {
		write(fixtures.Infrastructure(configv1.AWSPlatformType))
		code, out, _ := runCLI("plan", "-f", dir, "--release-version", fixtures.ReleaseVersion, "-o", "json")
		Expect(code).To(Equal(1))
		Expect(parsePlan(out).Notes).To(ContainElements(
			"No FeatureGate/cluster: the feature gates are unknown",
			HavePrefix("No ClusterVersion/version:"),
			"No ConfigMap openshift-machine-config-operator/coreos-bootimages: there is no stream to update to",
			"No MachineConfiguration/cluster among the inputs: planned with the default selection",
		))
	})

	DescribeTable("refuses, naming it, what it does not read",
		func(doc, message string) {
			write(planCluster()...)
			Expect(os.WriteFile(filepath.Join(dir, "extra.yaml"), []byte(doc), 0o600)).To(Succeed())
			code, _, stderr := runCLI("plan", "-f", dir)
			Expect(code).To(Equal(2))
			Expect(stderr).To(ContainSubstring(message))
		},
		Entry("a misspelt kind", "apiVersion: machine.openshift.io/v1beta1\nkind: MachineSets\nmetadata: {name: x, namespace: openshift-machine-api}\n",
			"extra.yaml, document 1: MachineSets x: not a kind the plan reads"),
		Entry("a kind the plan does not read", "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
			"not a kind the plan reads (Infrastructure, FeatureGate"),
		Entry("an unknown field", "apiVersion: machine.openshift.io/v1beta1\nkind: MachineSet\nmetadata: {name: x, namespace: openshift-machine-api}\nspec: {replica: 3}\n",
			`MachineSet x: strict decoding error: unknown field "spec.replica"`),
	)

	It("reads every document of stdin with -f -", func() {
		var in bytes.Buffer
		writeYAML(filepath.Join(dir, "all.yaml"), append(planCluster(), planMachineSets()...)...)
		data, err := os.ReadFile(filepath.Join(dir, "all.yaml"))
		Expect(err).NotTo(HaveOccurred())
		in.Write(data)
		var stdout, stderr bytes.Buffer
		code := runWithStdin(context.Background(), &in, []string{"plan", "-f", "-", "--aws-images", writeAMIs(), "-o", "json"}, &stdout, &stderr)
		Expect(stderr.String()).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(parsePlan(stdout.String()).Items).To(HaveLen(5), "the CPMS and the four MachineSets")
	})
})

var _ = Describe("bootimagectl plan --aws-images", func() {
	var dir string
	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		writeYAML(filepath.Join(dir, "cluster.yaml"), append(planCluster(), planMachineSets()...)...)
	})

	It("reads the output of aws ec2 describe-images", func() {
		type image struct {
			ImageId, OwnerId, Name, Description, CreationDate, State, Architecture string //nolint:revive // the AWS CLI's names
		}
		var images []image
		for _, img := range fixtures.AWSImages() {
			if img.Region == "us-east-1" {
				images = append(images, image{img.ImageID, img.OwnerID, img.Name, img.Description, img.CreationDate, img.State, "x86_64"})
			}
		}
		data, err := json.Marshal(map[string]any{"Images": images})
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(dir, "describe-images.json")
		Expect(os.WriteFile(path, data, 0o600)).To(Succeed())

		code, out, stderr := runCLI("plan", "-f", filepath.Join(dir, "cluster.yaml"), "--aws-images", path, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(parsePlan(out).Items).To(ContainElements(
			And(HaveField("Name", "worker-a"), HaveField("Action", bootimage.Update)),
			And(HaveField("Name", "custom"), HaveField("Reason", bootimage.ReasonCustomImage)),
		))
	})

	It("says an AMI missing from the file is missing from the file, not from EC2", func() {
		path := filepath.Join(dir, "amis.json")
		Expect(os.WriteFile(path, []byte("[]"), 0o600)).To(Succeed())
		code, out, _ := runCLI("plan", "-f", filepath.Join(dir, "cluster.yaml"), "--aws-images", path, "-o", "json")
		Expect(code).To(Equal(1))
		Expect(parsePlan(out).Items).To(ContainElement(And(HaveField("Name", "worker-a"), HaveField("Action", bootimage.Error),
			HaveField("Message", ContainSubstring("AMI ami-0aaaaaaaaaaaaaa01 in us-east-1 is not in "+path+" (EC2 was not asked)")),
			HaveField("Message", Not(ContainSubstring("does not exist"))))))
	})
})
