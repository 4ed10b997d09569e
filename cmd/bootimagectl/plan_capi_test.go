package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// capiTemplate is an AWSMachineTemplate with ami, in openshift-cluster-api.
func capiTemplate(name, ami string) string {
	return fmt.Sprintf(`---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachineTemplate
metadata: {name: %s, namespace: openshift-cluster-api}
spec:
  template:
    spec:
      instanceType: m6i.xlarge
      ami: {id: %s}
`, name, ami)
}

// capiOwner is fixtures.ClusterAPIOwner as a YAML document, at generation 1, with status.
func capiOwner(kind, name, template string, status map[string]any) string {
	o := fixtures.ClusterAPIOwner(kind, name, template)
	o.SetGeneration(1)
	o.Object["status"] = status
	data, err := yaml.Marshal(o.Object)
	Expect(err).NotTo(HaveOccurred())
	return "---\n" + string(data)
}

// capiObjects are a Cluster API-only MachineSet and a MachineDeployment of 3 Machines with an old
// AMI, and a Cluster API MachineSet whose Machine API twin is in charge.
func capiObjects() string {
	return capiTemplate("w-1a-old", fixtures.OldAWSAMI) +
		capiOwner(bootimage.KindMachineSet, "capi-only", "w-1a-old", map[string]any{}) +
		capiOwner(bootimage.KindMachineDeployment, "md", "w-1a-old", map[string]any{"observedGeneration": int64(1), "replicas": int64(3)}) +
		capiOwner(bootimage.KindMachineSet, "twinned", "w-1a-old", map[string]any{})
}

// createCAPIObjects creates capiObjects through c, with their status.
func createCAPIObjects(ctx context.Context, c client.Client) {
	GinkgoHelper()
	objs, err := decodeAll(scheme, "capi.yaml", strings.NewReader(capiObjects()))
	Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		status := u.Object["status"]
		Expect(c.Create(ctx, u)).To(Succeed())
		if s, ok := status.(map[string]any); ok && len(s) > 0 {
			u.Object["status"] = s
			Expect(c.Status().Update(ctx, u)).To(Succeed())
		}
	}
}

// capiCluster is an AWS cluster with gate ManagedBootImagesAWSCAPI on, every Cluster API object
// selected, and the Machine API twin of "twinned" in charge of it.
func capiCluster(gates ...configv1.FeatureGateName) []client.Object {
	all := func(resource operatorv1.MachineManagerMachineSetsResourceType) operatorv1.MachineManager {
		m := fixtures.MachineManager(resource, operatorv1.All, nil)
		m.APIGroup = bootimage.ClusterAPIGroup
		return m
	}
	twin := fixtures.MachineSet("twinned", fixtures.AWSProviderSpec("us-east-1", fixtures.NewAWSAMIUSEast1))
	twin.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
	return []client.Object{
		fixtures.Infrastructure(configv1.AWSPlatformType),
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, gates, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{
			fixtures.MachineManager(operatorv1.MachineSets, operatorv1.All, nil), all(operatorv1.MachineSets), all(bootimage.MachineDeployments),
		}}),
		fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		twin,
	}
}

var _ = Describe("bootimagectl plan on files with Cluster API objects", func() {
	var dir, images string
	write := func(gates ...configv1.FeatureGateName) {
		dir = GinkgoT().TempDir()
		writeYAML(filepath.Join(dir, "cluster.yaml"), capiCluster(gates...)...)
		Expect(os.WriteFile(filepath.Join(dir, "capi.yaml"), []byte(capiObjects()), 0o600)).To(Succeed())
		images = writeAMIs()
	}

	It("decides each as the operator does: its template's AMI, the rollout a MachineDeployment makes, the twin's authority", func() {
		write(fg.ManagedBootImagesAWSCAPI)
		code, out, stderr := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0), out)
		p := parsePlan(out)
		capi := func(kind, name string, action bootimage.Action, reason string) OmegaMatcher {
			return And(HaveField("Kind", kind), HaveField("APIGroup", "cluster.x-k8s.io"), HaveField("Namespace", "openshift-cluster-api"),
				HaveField("Name", name), HaveField("Action", action), HaveField("Reason", reason))
		}
		Expect(p.Items).To(ContainElements(
			And(capi("MachineSet", "capi-only", bootimage.Update, bootimage.ReasonImageOutdated),
				HaveField("Current", fixtures.OldAWSAMI), HaveField("Target", fixtures.NewAWSAMIUSEast1), HaveField("Rolls", BeNil())),
			And(capi("MachineDeployment", "md", bootimage.Update, bootimage.ReasonImageOutdated),
				HaveField("Target", fixtures.NewAWSAMIUSEast1), HaveField("Rolls", HaveValue(Equal(3))), HaveField("Message", ContainSubstring("rolls 3 machines"))),
			capi("MachineSet", "twinned", bootimage.Skip, bootimage.ReasonAuthorityMachineAPI),
		))
		Expect(p.Items).To(HaveLen(4)) // and the Machine API twin
		Expect(p.Summary).To(Equal(bootimage.Summary{Update: 2, NoChange: 1, Skip: 1}))
	})

	It("names them with their API group in the table, says what the MachineDeployment rolls, and keeps to 120 columns", func() {
		write(fg.ManagedBootImagesAWSCAPI)
		code, out, _ := runCLI("plan", "-f", dir, "--aws-images", images)
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`(?m)^machinedeployment\.cluster\.x-k8s\.io/md +Update +ImageOutdated +` + fixtures.OldAWSAMI))
		Expect(out).To(MatchRegexp(`(?m)^machineset\.cluster\.x-k8s\.io/twinned +Skip +AuthorityMachineAPI `))
		Expect(out).To(MatchRegexp(`(?m)^machineset/twinned +NoChange `))
		Expect(out).To(ContainSubstring("\nmachinedeployment.cluster.x-k8s.io/md rolls 3 machines: all its Machines are replaced\n"))
		for _, line := range strings.Split(out, "\n") {
			Expect(len(line)).To(BeNumerically("<=", 120), line)
		}

		_, wide, _ := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "wide")
		Expect(wide).To(MatchRegexp(`(?m)^MachineDeployment\.cluster\.x-k8s\.io +md +AWS .*; rolls 3 machines: `))
	})

	It("lists none while gate ManagedBootImagesAWSCAPI is off, as the operator starts no Cluster API controller then", func() {
		write()
		code, out, stderr := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0), out)
		Expect(parsePlan(out).Items).To(ConsistOf(HaveField("Name", "twinned")))
	})

	It("names in a note the Cluster API MachineSets whose Machine API twin is not in the files", func() {
		write(fg.ManagedBootImagesAWSCAPI)
		code, out, _ := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(code).To(Equal(0), out)
		Expect(parsePlan(out).Notes).To(ContainElement("No MachineSet openshift-machine-api/capi-only: the Cluster API one is planned as having no twin"))
		Expect(parsePlan(out).Notes).NotTo(ContainElement(ContainSubstring("twinned")), "its twin is in the files")
		Expect(parsePlan(out).Notes).NotTo(ContainElement(ContainSubstring("/md:")), "a MachineDeployment has no twin")
	})

	It("leaves both sides of a migrating MachineSet alone", func() {
		write(fg.ManagedBootImagesAWSCAPI)
		twin := fixtures.MachineSet("moving", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		twin.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMigrating
		writeYAML(filepath.Join(dir, "moving.yaml"), twin)
		Expect(os.WriteFile(filepath.Join(dir, "moving-capi.yaml"), []byte(capiOwner(bootimage.KindMachineSet, "moving", "w-1a-old", map[string]any{})), 0o600)).To(Succeed())
		code, out, _ := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(code).To(Equal(0), out)
		Expect(parsePlan(out).Items).To(ContainElements(
			And(HaveField("Kind", "MachineSet"), HaveField("APIGroup", "cluster.x-k8s.io"), HaveField("Name", "moving"), HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonMigrating)),
			And(HaveField("Kind", "MachineSet"), HaveField("Namespace", "openshift-machine-api"), HaveField("Name", "moving"), HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonMigrating)),
		))
	})

	It("waits for a MachineDeployment's rollout in progress", func() {
		write(fg.ManagedBootImagesAWSCAPI)
		rolling := capiOwner(bootimage.KindMachineDeployment, "rolling", "w-1a-old", map[string]any{
			"observedGeneration": int64(1), "replicas": int64(2),
			"conditions": []any{map[string]any{"type": "RollingOut", "status": "True", "reason": "RollingOut", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}},
		})
		Expect(os.WriteFile(filepath.Join(dir, "rolling.yaml"), []byte(rolling), 0o600)).To(Succeed())
		code, out, _ := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(code).To(Equal(0), out)
		Expect(parsePlan(out).Items).To(ContainElement(And(HaveField("Kind", "MachineDeployment"), HaveField("Name", "rolling"),
			HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonMachineDeploymentRollingOut), HaveField("Rolls", HaveValue(Equal(2))))))
	})

	It("leaves the objects of a paused Cluster, and an object annotated paused, alone, as the operator does", func() {
		write(fg.ManagedBootImagesAWSCAPI)
		paused := capiOwner(bootimage.KindMachineSet, "annotated", "w-1a-old", map[string]any{})
		paused = strings.Replace(paused, "metadata:\n", "metadata:\n  annotations: {"+clusterapi.PausedAnnotation+": \"\"}\n", 1)
		Expect(os.WriteFile(filepath.Join(dir, "annotated.yaml"), []byte(paused), 0o600)).To(Succeed())
		code, out, _ := runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(code).To(Equal(0), out)
		Expect(parsePlan(out).Items).To(ContainElements(
			And(HaveField("APIGroup", "cluster.x-k8s.io"), HaveField("Name", "annotated"), HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonPaused)),
			And(HaveField("APIGroup", "cluster.x-k8s.io"), HaveField("Name", "capi-only"), HaveField("Action", bootimage.Update)),
		))

		cluster := "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: demo, namespace: openshift-cluster-api}\nspec: {paused: true}\n"
		Expect(os.WriteFile(filepath.Join(dir, "cluster-demo.yaml"), []byte(cluster), 0o600)).To(Succeed())
		code, out, _ = runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(code).To(Equal(0), out)
		p := parsePlan(out)
		for _, name := range []string{"capi-only", "md"} {
			Expect(p.Items).To(ContainElement(And(HaveField("APIGroup", "cluster.x-k8s.io"), HaveField("Name", name),
				HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonPaused), HaveField("Message", ContainSubstring("Cluster")))))
		}
		Expect(p.Items).To(ContainElement(And(HaveField("APIGroup", "cluster.x-k8s.io"), HaveField("Name", "twinned"), HaveField("Reason", bootimage.ReasonAuthorityMachineAPI))),
			"a skip stays what it was")
	})

	It("refuses a Cluster API kind it does not read, naming the ones it does", func() {
		write(fg.ManagedBootImagesAWSCAPI)
		machine := "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Machine\nmetadata: {name: m, namespace: openshift-cluster-api}\n"
		Expect(os.WriteFile(filepath.Join(dir, "machine.yaml"), []byte(machine), 0o600)).To(Succeed())
		code, _, stderr := runCLI("plan", "-f", dir)
		Expect(code).To(Equal(2))
		Expect(stderr).To(ContainSubstring("machine.yaml, document 1: Machine m: not a kind the plan reads"))
		Expect(stderr).To(ContainSubstring("cluster.x-k8s.io MachineSet, MachineDeployment"))
	})
})

// Ordered for its BeforeAll: an API server with the Cluster API CRDs, seeded once with owners,
// templates and twins whose status the spec reads.
var _ = Describe("bootimagectl plan on a cluster with Cluster API objects", Ordered, func() {
	ctx := context.Background()
	var env *testenv.Env
	var kubeconfig string
	BeforeAll(func() {
		env = testenv.StartForSpecs(testenv.Options{CAPI: true})
		kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
		Expect(fixtures.Create(ctx, env.Client, capiCluster(fg.ManagedBootImagesAWSCAPI)...)).To(Succeed())
		twin := &machinev1beta1.MachineSet{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "twinned"}, twin)).To(Succeed())
		twin.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
		Expect(env.Client.Status().Update(ctx, twin)).To(Succeed())
		createCAPIObjects(ctx, env.Client)
	})

	It("reads them, with their templates and twins, and decides as for the same objects in files", func() {
		dir := GinkgoT().TempDir()
		writeYAML(filepath.Join(dir, "cluster.yaml"), capiCluster(fg.ManagedBootImagesAWSCAPI)...)
		Expect(os.WriteFile(filepath.Join(dir, "capi.yaml"), []byte(capiObjects()), 0o600)).To(Succeed())
		images := writeAMIs()

		code, out, stderr := runCLI("plan", "--kubeconfig", kubeconfig, "--aws-images", images, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0), out)
		live := parsePlan(out)
		_, out, _ = runCLI("plan", "-f", dir, "--aws-images", images, "-o", "json")
		Expect(live.Items).To(Equal(parsePlan(out).Items))
		Expect(live.Items).To(ContainElement(And(HaveField("Name", "md"), HaveField("Action", bootimage.Update), HaveField("Rolls", HaveValue(Equal(3))))))
		Expect(live.Summary).To(Equal(bootimage.Summary{Update: 2, NoChange: 1, Skip: 1}))
	})

	It("shows the history and the hold of a Cluster API object, and refuses to undo its restore", func() {
		owner := &unstructured.Unstructured{}
		owner.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(bootimage.KindMachineSet))
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: bootimage.ClusterAPINamespace, Name: "capi-only"}, owner)).To(Succeed())
		at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		moved := clusterapi.TemplateMove(bootimage.Decision{Current: "ami-old", Target: "ami-new"}, "w-1a-old", "capi-only-0123456789", at)
		moved.Outcome, moved.Machine, moved.Error = bootimage.Failed, "capi-only-x1", "InvalidAMIID.NotFound"
		h := bootimage.History{moved, {From: "ami-new", To: "ami-old", At: at, By: bootimage.ByRestore}}
		raw, err := json.Marshal(h)
		Expect(err).NotTo(HaveOccurred())
		hold, err := json.Marshal(bootimage.Hold{Target: "ami-new", Restored: "ami-old", Machine: "capi-only-x1", By: bootimage.ByRestore, At: at})
		Expect(err).NotTo(HaveOccurred())
		owner.SetAnnotations(map[string]string{bootimage.HistoryAnnotation: string(raw), bootimage.HoldAnnotation: string(hold)})
		Expect(env.Client.Update(ctx, owner)).To(Succeed())

		code, out, stderr := runCLI("history", "machineset.cluster.x-k8s.io/capi-only", "--kubeconfig", kubeconfig)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`(?m)^\S+ +operator +ami-old +ami-new +Failed +capi-only-x1 +InvalidAMIID.NotFound\n\S+ +restore +ami-new +ami-old +- +- +-\n`))
		Expect(out).To(ContainSubstring("oc annotate machineset.cluster.x-k8s.io/capi-only -n openshift-cluster-api " + bootimage.HoldAnnotation + "-"))

		_, out, _ = runCLI("history", "machineset.cluster.x-k8s.io/capi-only", "--kubeconfig", kubeconfig, "-o", "json")
		Expect(out).To(ContainSubstring(`"from": "w-1a-old"`), "the template a restore points it back at")

		code, _, stderr = runCLI("restore", "machineset.cluster.x-k8s.io/capi-only", "--kubeconfig", kubeconfig)
		Expect(code).To(Equal(exitUnusable))
		Expect(stderr).To(ContainSubstring("machineset.cluster.x-k8s.io/capi-only: no boot image change to undo"), "a restore is not undone by another")
	})
})
