package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/cpms"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
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
		Entry("a kind at an apiVersion that has no such kind, named without Go's internals", "apiVersion: machine.openshift.io/v1\nkind: MachineSet\nmetadata: {name: x, namespace: openshift-machine-api}\n",
			"extra.yaml, document 1: MachineSet x: apiVersion machine.openshift.io/v1 has no kind MachineSet; it is read as apiVersion machine.openshift.io/v1beta1"),
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

// The same objects, as files and on a cluster, are read as the same inputs: a plan of files and a
// live plan go through one loader (package inputs), over an in-memory reader or the direct client.
var _ = Describe("bootimagectl plan reads files and a cluster as the same inputs", Ordered, func() {
	ctx := context.Background()
	var env *testenv.Env
	objects := func() []client.Object {
		return append(append(planCluster(), planMachineSets()...),
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-0", Labels: map[string]string{"node-role.kubernetes.io/master": "", corev1.LabelArchStable: "arm64"}}},
			fixtures.Pool("worker", "rhel-9"))
	}
	BeforeAll(func() {
		env = testenv.StartForSpecs(testenv.Options{CAPI: true})
		Expect(fixtures.Create(ctx, env.Client, objects()...)).To(Succeed())
		createCAPIObjects(ctx, env.Client)
	})

	It("reads the cluster-wide inputs, the objects and their user data alike", func() {
		// The files are a dump of the cluster, as `oc get -o yaml` gives one: the server's copies,
		// with the defaults it adds, so every difference below is the reading's.
		dir := GinkgoT().TempDir()
		capi, err := decodeAll(scheme, "capi.yaml", strings.NewReader(capiObjects()))
		Expect(err).NotTo(HaveOccurred())
		var dump []client.Object
		for _, o := range append(objects(), capi...) {
			got := o.DeepCopyObject().(client.Object)
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), got)).To(Succeed())
			got.SetManagedFields(nil)
			dump = append(dump, got)
		}
		writeYAML(filepath.Join(dir, "objects.yaml"), dump...)
		objs, err := loadFiles(scheme, []string{dir}, nil)
		Expect(err).NotTo(HaveOccurred())
		files, err := fromObjects(scheme, objs)
		Expect(err).NotTo(HaveOccurred())
		c, err := client.New(env.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		live, err := fromCluster(ctx, c)
		Expect(err).NotTo(HaveOccurred())

		// What a plan reads, without what only a server adds (resource versions, timestamps, uids).
		type read struct {
			Cluster     bootimage.Cluster
			Infra       [2]any // Infrastructure's spec and status
			Gates       string
			InForce     bool
			BootImages  map[string]string
			Secrets     []string
			Objects     []bootimage.Object
			UserData    []*bootimage.UserData
			Templates   []string
			MissingMC   bool
			NotComputed bool
		}
		readAll := func(in planInputs) read {
			GinkgoHelper()
			l := in.loader(fixtures.ReleaseVersion, nil)
			loaded, err := l.Load(ctx)
			Expect(err).NotTo(HaveOccurred())
			o, err := in.objects(ctx)
			Expect(err).NotTo(HaveOccurred())
			r := read{Cluster: loaded.Cluster, Gates: fmt.Sprint(loaded.Cluster.Gates), InForce: loaded.InForce, BootImages: loaded.Objects.BootImages.Data}
			r.Infra = [2]any{loaded.Cluster.Infrastructure.Spec, loaded.Cluster.Infrastructure.Status}
			r.Cluster.Gates, r.Cluster.BootImages, r.Cluster.Infrastructure = nil, nil, nil
			for name := range in.secrets {
				r.Secrets = append(r.Secrets, name)
			}
			sort.Strings(r.Secrets)
			add := func(obj bootimage.Object) {
				ud, err := l.UserData(ctx, obj.ProviderSpec)
				Expect(err).NotTo(HaveOccurred())
				if ud != nil {
					ud.ResourceVersion = ""
				}
				r.Objects, r.UserData = append(r.Objects, obj), append(r.UserData, ud)
			}
			for _, ms := range o.machineSets {
				add(bootimage.MachineSetObject(ms))
			}
			add(cpms.Object(o.cpms))
			for _, capi := range o.clusterAPI {
				add(capi.Object)
				r.Templates = append(r.Templates, capi.Template.GetKind()+"/"+capi.Template.GetName())
			}
			return r
		}
		fromFiles, fromLive := readAll(files), readAll(live)
		Expect(fromLive.Gates).To(ContainSubstring(string(fg.ManagedBootImagesCPMS)))
		Expect(fromLive.Cluster.ControlPlaneArch).To(Equal("arm64"), "the control plane's Node")
		Expect(fromLive.Cluster.PoolStreams).To(HaveKeyWithValue("worker", "rhel-9"))
		Expect(fromLive.Objects).To(HaveLen(4 + 1 + 3)) // the MachineSets, the CPMS, the Cluster API objects
		Expect(fromLive.UserData).To(ContainElement(HaveField("Found", true)))
		Expect(fromLive.Templates).To(HaveEach("AWSMachineTemplate/w-1a-old"))
		Expect(fromLive.InForce).To(BeFalse(), "the operator has not computed the status: both plan the spec's selection")

		Expect(fromFiles.Cluster).To(Equal(fromLive.Cluster))
		Expect(fromFiles.Infra).To(Equal(fromLive.Infra))
		Expect(fromFiles.Gates).To(Equal(fromLive.Gates))
		Expect(fromFiles.BootImages).To(Equal(fromLive.BootImages))
		Expect(fromFiles.Secrets).To(Equal(fromLive.Secrets))
		Expect(fromFiles.UserData).To(Equal(fromLive.UserData))
		Expect(fromFiles.Templates).To(Equal(fromLive.Templates))
		Expect(fromFiles.Objects).To(HaveLen(len(fromLive.Objects)))
		for i := range fromLive.Objects {
			f, l := fromFiles.Objects[i], fromLive.Objects[i]
			Expect([]any{f.Kind, f.APIGroup, f.Namespace, f.Name, f.Labels, f.TemplateLabels, f.OwnerReferences}).To(Equal([]any{l.Kind, l.APIGroup, l.Namespace, l.Name, l.Labels, l.TemplateLabels, l.OwnerReferences}))
			Expect(f.ProviderSpec).To(MatchJSON(l.ProviderSpec), l.Name)
		}
	})

	It("reads a cluster with as many requests however many objects it has", func() {
		// reads plans the cluster offline and counts its GETs and LISTs.
		reads := func() int {
			GinkgoHelper()
			direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
			Expect(err).NotTo(HaveOccurred())
			var n atomic.Int32
			counted := interceptor.NewClient(direct, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					n.Add(1)
					return c.Get(ctx, key, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					n.Add(1)
					return c.List(ctx, list, opts...)
				},
			})
			in, err := fromCluster(ctx, counted)
			Expect(err).NotTo(HaveOccurred())
			p, err := plan(ctx, in, fixtures.ReleaseVersion, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(p.Items).NotTo(BeEmpty())
			return int(n.Load())
		}
		before := reads()

		// Two more Machine API MachineSets with user data, and two more Cluster API MachineSets,
		// each with a template, a twin to look for and a Cluster.
		more := []client.Object{
			fixtures.MachineSet("more-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
			fixtures.MachineSet("more-b", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
			fixtures.ClusterAPIOwner(bootimage.KindMachineSet, "more-capi-a", "w-1a-old"),
			fixtures.ClusterAPIOwner(bootimage.KindMachineSet, "more-capi-b", "w-1a-old"),
		}
		for _, o := range more {
			Expect(env.Client.Create(ctx, o)).To(Succeed())
			DeferCleanup(env.Client.Delete, ctx, o)
		}
		Expect(reads()).To(Equal(before))
	})
})
