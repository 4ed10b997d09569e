package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

func TestBootimagectl(t *testing.T) {
	testenv.RunSpecs(t, "bootimagectl", testenv.Waits{Timeout: 30 * time.Second, Polling: 50 * time.Millisecond})
}

// The operator's log, for the specs that run it.
var _ = BeforeSuite(func() {
	testenv.LogToGinkgo(0)
})

var scheme = kube.NewScheme()

// writeYAML writes objs into one multi-document YAML file, as `kubectl get -o yaml` would.
func writeYAML(path string, objs ...client.Object) {
	GinkgoHelper()
	var buf bytes.Buffer
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, scheme)
		Expect(err).NotTo(HaveOccurred())
		o.GetObjectKind().SetGroupVersionKind(gvk)
		data, err := yaml.Marshal(o)
		Expect(err).NotTo(HaveOccurred())
		buf.WriteString("---\n")
		buf.Write(data)
	}
	Expect(os.WriteFile(path, buf.Bytes(), 0o600)).To(Succeed())
}

// writeList writes objs as a v1 List in JSON.
func writeList(path string, objs ...client.Object) {
	GinkgoHelper()
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{}}
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, scheme)
		Expect(err).NotTo(HaveOccurred())
		o.GetObjectKind().SetGroupVersionKind(gvk)
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		Expect(err).NotTo(HaveOccurred())
		list["items"] = append(list["items"].([]any), u)
	}
	data, err := json.Marshal(list)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
}

// planCluster is an AWS cluster with the CPMS opted in and an outdated CPMS.
func planCluster() []client.Object {
	return []client.Object{
		fixtures.Infrastructure(configv1.AWSPlatformType),
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, operatorv1.All, nil)}}),
		fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		fixtures.ControlPlaneMachineSet(fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), machinev1.ControlPlaneMachineSetStateActive),
	}
}

// planMachineSets are one MachineSet to update, one up to date, one custom and one owned.
func planMachineSets() []client.Object {
	owned := fixtures.MachineSet("owned", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "hive.openshift.io/v1", Kind: "MachinePool", Name: "pool", UID: "1"}}
	return []client.Object{
		fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
		fixtures.MachineSet("current", fixtures.AWSProviderSpec("us-east-1", fixtures.NewAWSAMIUSEast1)),
		fixtures.MachineSet("custom", fixtures.AWSProviderSpec("us-east-1", fixtures.CustomAMI)),
		owned,
	}
}

// writeAMIs writes the fixtures' AMI catalogue as --aws-images reads it and returns its path.
func writeAMIs() string {
	GinkgoHelper()
	p := filepath.Join(GinkgoT().TempDir(), "amis.json")
	data, err := json.Marshal(fixtures.AWSImages())
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(p, data, 0o600)).To(Succeed())
	return p
}

func runCLI(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

var _ = Describe("bootimagectl plan on files", func() {
	var dir, images string
	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		writeYAML(filepath.Join(dir, "cluster.yaml"), planCluster()...)
		Expect(os.Mkdir(filepath.Join(dir, "machinesets"), 0o755)).To(Succeed())
		writeList(filepath.Join(dir, "machinesets", "list.json"), planMachineSets()...)
		images = writeAMIs()
	})

	It("prints every decision as JSON, with the operator's reasons", func() {
		code, out, stderr := runCLI("plan", "-f", filepath.Join(dir, "cluster.yaml"), "-f", filepath.Join(dir, "machinesets"), "--aws-images", images, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0), out)
		Expect(out).To(MatchJSON(`{
  "items": [
    {"kind": "ControlPlaneMachineSet", "namespace": "openshift-machine-api", "name": "cluster", "platform": "AWS", "arch": "amd64", "stream": "rhel-9", "action": "Update", "reason": "ImageOutdated",
     "message": "AMI ami-0aaaaaaaaaaaaaa01 is outdated: the stream's is ami-0f1e2d3c4b5a69788", "current": "ami-0aaaaaaaaaaaaaa01", "target": "ami-0f1e2d3c4b5a69788"},
    {"kind": "MachineSet", "namespace": "openshift-machine-api", "name": "current", "platform": "AWS", "arch": "amd64", "stream": "rhel-9", "action": "NoChange", "reason": "UpToDate",
     "message": "AMI ami-0f1e2d3c4b5a69788 is the stream's", "current": "ami-0f1e2d3c4b5a69788", "target": "ami-0f1e2d3c4b5a69788"},
    {"kind": "MachineSet", "namespace": "openshift-machine-api", "name": "custom", "platform": "AWS", "arch": "amd64", "stream": "rhel-9", "action": "Skip", "reason": "CustomImage",
     "message": "AMI ami-0c0570c0570c05700 is owned by account 123456789012, not by RHCOS (531415883065) or the AWS Marketplace (679593333241)", "current": "ami-0c0570c0570c05700", "target": ""},
    {"kind": "MachineSet", "namespace": "openshift-machine-api", "name": "owned", "platform": "AWS", "arch": "", "stream": "rhel-9", "action": "Skip", "reason": "OwnedByController",
     "message": "owned by MachinePool pool, which manages its boot image", "current": "ami-0aaaaaaaaaaaaaa01", "target": ""},
    {"kind": "MachineSet", "namespace": "openshift-machine-api", "name": "worker-a", "platform": "AWS", "arch": "amd64", "stream": "rhel-9", "action": "Update", "reason": "ImageOutdated",
     "message": "AMI ami-0aaaaaaaaaaaaaa01 is outdated: the stream's is ami-0f1e2d3c4b5a69788", "current": "ami-0aaaaaaaaaaaaaa01", "target": "ami-0f1e2d3c4b5a69788"}
  ],
  "summary": {"update": 2, "noChange": 1, "skip": 2, "error": 0}
}`))
	})

	It("prints an aligned table of 120 columns at most by default, rows not updated with their current image", func() {
		code, out, _ := runCLI("plan", "-f", dir, "--aws-images", images)
		Expect(code).To(Equal(0))
		Expect(out).To(HavePrefix("NAME                            ACTION    REASON             CURRENT                TARGET\n"))
		Expect(out).To(ContainSubstring("\nmachineset/owned                Skip      OwnedByController  ami-0aaaaaaaaaaaaaa01  -\n"))
		Expect(out).To(ContainSubstring("2 to update, 1 up to date, 2 skipped, 0 errors"))
		Expect(out).NotTo(ContainSubstring("MESSAGE"))
		for _, line := range strings.Split(out, "\n") {
			Expect(len(line)).To(BeNumerically("<=", 120), line)
		}
	})

	It("prints the messages with -o wide", func() {
		code, out, _ := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "wide")
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("KIND                    NAME      PLATFORM  ARCH   STREAM  ACTION    REASON"))
		Expect(out).To(MatchRegexp(`(?m)^MachineSet +owned .*owned by MachinePool pool, which manages its boot image$`))
	})

	It("prints YAML with -o yaml, the same document as -o json", func() {
		_, asJSON, _ := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		code, asYAML, stderr := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "yaml")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(asYAML).To(ContainSubstring("\n  reason: OwnedByController\n"))
		Expect(asYAML).To(MatchYAML(asJSON))
	})

	It("with --offline and no AMI catalogue, takes the stream's own AMI as up to date", func() {
		code, out, _ := runCLI("plan", "-f", dir, "--offline", "-o", "json")
		Expect(code).To(Equal(0))
		Expect(parsePlan(out).Items).To(ContainElement(And(HaveField("Name", "current"), HaveField("Action", bootimage.NoChange),
			HaveField("Reason", bootimage.ReasonUpToDate), HaveField("Target", fixtures.NewAWSAMIUSEast1))))
	})

	It("exits 1 when an item is an Error", func() {
		writeYAML(filepath.Join(dir, "broken.yaml"), fixtures.MachineSet("broken", `{"ami": 42}`))
		code, out, _ := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(code).To(Equal(1))
		var p Plan
		Expect(json.Unmarshal([]byte(out), &p)).To(Succeed())
		Expect(p.Summary.Error).To(Equal(1))
	})

	It("reports a malformed stream per item, without crashing", func() {
		cm := fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3")
		cm.Data["stream"] = "{not json"
		Expect(os.Remove(filepath.Join(dir, "cluster.yaml"))).To(Succeed())
		writeYAML(filepath.Join(dir, "cluster.yaml"), fixtures.Infrastructure(configv1.AWSPlatformType),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, nil, nil), fixtures.ClusterVersion(fixtures.ReleaseVersion, true), cm)
		code, out, _ := runCLI("plan", "-f", dir, "-o", "json")
		Expect(code).To(Equal(1))
		var p Plan
		Expect(json.Unmarshal([]byte(out), &p)).To(Succeed())
		Expect(p.Items).To(HaveEach(HaveField("Reason", BeElementOf(bootimage.ReasonInvalidStream, bootimage.ReasonOwnedByController))))
		Expect(p.Summary.Error).To(Equal(3))
	})

	It("says a malformed entry of streams and exits 1 as the operator degrades, though no object boots that stream", func() {
		cm := fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion)
		var streams map[string]json.RawMessage
		Expect(json.Unmarshal([]byte(cm.Data["streams"]), &streams)).To(Succeed())
		streams["rhel-10"] = json.RawMessage(`{"stream": "rhcos-5.0", "architectures": "garbage"}`)
		data, err := json.Marshal(streams)
		Expect(err).NotTo(HaveOccurred())
		cm.Data["streams"] = string(data)
		Expect(os.Remove(filepath.Join(dir, "cluster.yaml"))).To(Succeed())
		writeYAML(filepath.Join(dir, "cluster.yaml"), fixtures.Infrastructure(configv1.AWSPlatformType),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, nil, nil), fixtures.ClusterVersion(fixtures.ReleaseVersion, true), cm)
		code, out, _ := runCLI("plan", "-f", dir, "-o", "json", "--aws-images", writeAMIs())
		Expect(code).To(Equal(1), out)
		p := parsePlan(out)
		Expect(p.Items).NotTo(ContainElement(HaveField("Action", bootimage.Error)), "every object boots rhel-9")
		Expect(p.Notes).To(ContainElement("ConfigMap openshift-machine-config-operator/coreos-bootimages key streams, entry rhel-10: not a CoreOS stream: a string at architectures where an object is expected"))
	})

	DescribeTable("exits 2 on unusable input",
		func(prepare func() []string, message string) {
			code, _, stderr := runCLI(prepare()...)
			Expect(code).To(Equal(2))
			Expect(stderr).To(ContainSubstring(message))
		},
		Entry("no Infrastructure", func() []string { return []string{"plan", "-f", filepath.Join(dir, "machinesets")} }, "no Infrastructure cluster among the inputs"),
		Entry("a file that is not YAML", func() []string {
			Expect(os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("kind: [unclosed"), 0o600)).To(Succeed())
			return []string{"plan", "-f", dir}
		}, "bad.yaml, document 1"),
		Entry("a missing file", func() []string { return []string{"plan", "-f", filepath.Join(dir, "nope.yaml")} }, "no such file"),
		Entry("a bad output format", func() []string { return []string{"plan", "-f", dir, "-o", "xml"} }, `-o must be one of table, wide, json or yaml, not "xml"`),
	)
})

var _ = Describe("bootimagectl plan on files, the operator's cases", func() {
	images := writeAMIs
	DescribeTable("one MachineSet",
		func(platform configv1.PlatformType, ms *machinev1beta1.MachineSet, action bootimage.Action, reason string) {
			dir := GinkgoT().TempDir()
			writeYAML(filepath.Join(dir, "cluster.yaml"),
				fixtures.Infrastructure(platform),
				fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, nil, nil),
				fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
				fixtures.MachineConfiguration(nil),
				fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
				fixtures.UserDataSecret("broken-user-data", "#!/bin/sh"),
				ms,
			)
			_, out, stderr := runCLI("plan", "-f", dir, "--aws-images", images(), "-o", "json")
			Expect(stderr).To(BeEmpty())
			var p Plan
			Expect(json.Unmarshal([]byte(out), &p)).To(Succeed())
			Expect(p.Items).To(ConsistOf(And(HaveField("Action", action), HaveField("Reason", reason))))
		},
		Entry("AWS outdated", configv1.AWSPlatformType, fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)), bootimage.Update, bootimage.ReasonImageOutdated),
		Entry("AWS Marketplace", configv1.AWSPlatformType, fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.OldMarketplaceAMI)), bootimage.Update, bootimage.ReasonImageOutdated),
		Entry("GCP outdated", configv1.GCPPlatformType, fixtures.MachineSet("w", fixtures.GCPProviderSpec(fixtures.OldGCPImage)), bootimage.Update, bootimage.ReasonImageOutdated),
		Entry("Azure outdated", configv1.AzurePlatformType, fixtures.MachineSet("w", fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, "")), bootimage.Update, bootimage.ReasonImageOutdated),
		Entry("Azure confidential", configv1.AzurePlatformType, fixtures.MachineSet("w", fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, "TrustedLaunch")), bootimage.Skip, bootimage.ReasonConfidentialVM),
		Entry("vSphere", configv1.VSpherePlatformType, fixtures.MachineSet("w", fixtures.VSphereProviderSpec(fixtures.OldVSphereTmpl)), bootimage.Skip, bootimage.ReasonFailureDomainMismatch),
		Entry("bare metal", configv1.BareMetalPlatformType, fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)), bootimage.Skip, bootimage.ReasonUnsupportedPlatform),
		Entry("Windows", configv1.AWSPlatformType, func() *machinev1beta1.MachineSet {
			ms := fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
			ms.Spec.Template.Labels[bootimage.WindowsLabel] = "Windows"
			return ms
		}(), bootimage.Skip, bootimage.ReasonWindowsMachineSet),
		Entry("another OS stream", configv1.AWSPlatformType, func() *machinev1beta1.MachineSet {
			ms := fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
			ms.Labels[bootimage.OSStreamLabel] = "rhel-10"
			return ms
		}(), bootimage.Skip, bootimage.ReasonOSStreamNotInBootImages),
		Entry("an invalid architecture", configv1.AWSPlatformType, func() *machinev1beta1.MachineSet {
			ms := fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
			ms.Annotations[bootimage.ArchAnnotation] = "kubernetes.io/arch=mips"
			return ms
		}(), bootimage.Error, bootimage.ReasonInvalidArchitecture),
		Entry("an architecture the stream lacks", configv1.AWSPlatformType, func() *machinev1beta1.MachineSet {
			ms := fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
			ms.Annotations[bootimage.ArchAnnotation] = "kubernetes.io/arch=s390x"
			return ms
		}(), bootimage.Skip, bootimage.ReasonArchitectureNotInStream),
		Entry("a custom AMI", configv1.AWSPlatformType, fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.CustomAMI)), bootimage.Skip, bootimage.ReasonCustomImage),
		Entry("an AMI by ARN", configv1.AWSPlatformType, fixtures.MachineSet("w", `{"ami":{"arn":"arn:aws:ec2:us-east-1::image/ami-1"},"placement":{"region":"us-east-1"}}`), bootimage.Skip, bootimage.ReasonImageNotByID),
		Entry("an unreadable providerSpec", configv1.AWSPlatformType, fixtures.MachineSet("w", `{"ami": "nope"}`), bootimage.Error, bootimage.ReasonInvalidProviderSpec),
		Entry("invalid user data", configv1.AWSPlatformType, fixtures.MachineSet("w", `{"ami":{"id":"`+fixtures.OldAWSAMI+`"},"placement":{"region":"us-east-1"},"userDataSecret":{"name":"broken-user-data"}}`), bootimage.Error, bootimage.ReasonInvalidUserData),
		Entry("a hot loop", configv1.AWSPlatformType, func() *machinev1beta1.MachineSet {
			ms := fixtures.MachineSet("w", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
			allMachineSets := operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{fixtures.MachineManager(operatorv1.MachineSets, operatorv1.All, nil)}}
			ms.Annotations[bootimage.AttemptsAnnotation] = bootimage.Attempts{Target: fixtures.NewAWSAMIUSEast1, Count: 3, Selection: bootimage.SelectionKey(allMachineSets, operatorv1.MachineSets)}.String()
			return ms
		}(), bootimage.Error, bootimage.ReasonHotLoopDetected),
	)
})

var _ = DescribeTable("the image catalogue of a plan says once what it cannot look up",
	func(platform configv1.PlatformType, secrets []string, live bool, notes []string) {
		in := planInputs{infra: fixtures.Infrastructure(platform), secrets: map[string]*corev1.Secret{}}
		for _, name := range secrets {
			in.secrets[name] = &corev1.Secret{}
		}
		var c client.Reader
		if live {
			c = fake.NewClientBuilder().Build() // never called: the catalogue reads lazily
		}
		_, got, err := imageCatalog(in, c, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(HaveExactElements(notes))
	},
	Entry("AWS with credentials", configv1.AWSPlatformType, []string{aws.CredentialsSecret}, true, []string{}),
	Entry("AWS without", configv1.AWSPlatformType, nil, true, []string{
		"No Secret openshift-machine-api/aws-cloud-credentials: AMIs cannot be looked up in EC2, by the operator either, so RHCOS AMIs show as CustomImage"}),
	Entry("GCP without", configv1.GCPPlatformType, nil, true, []string{
		"No Secret openshift-machine-api/gcp-cloud-credentials: target images are not pre-flight checked, by the operator either"}),
	Entry("Azure needs none", configv1.AzurePlatformType, nil, true, []string{}),
	Entry("AWS offline", configv1.AWSPlatformType, []string{aws.CredentialsSecret}, false, []string{
		"No AMI catalogue (no --aws-images; files and --offline reach no cloud): AMIs other than the stream's are not looked up, so they show as CustomImage"}),
	Entry("GCP offline", configv1.GCPPlatformType, nil, false, []string{}),
)
