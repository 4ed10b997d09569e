package main

import (
	"context"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// Ordered to share one API server and one operator with Cluster API on; each spec makes its own
// owner and templates.
var _ = Describe("bootimagectl restore of a Cluster API object on a cluster", Ordered, func() {
	ctx := context.Background()
	var env *testenv.Env
	var kubeconfig string
	BeforeAll(func() {
		env = testenv.StartForSpecs(testenv.Options{CAPI: true})
		kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
		managers := []operatorv1.MachineManager{fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All), fixtures.ClusterAPIManager(bootimage.MachineDeployments, operatorv1.All)}
		Expect(fixtures.Create(ctx, env.Client, append(fixtures.ClusterAPIOnAWS(managers...),
			fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion))...)).To(Succeed())
		// The Cluster API controllers start once their CRDs are seen served: poll for them often;
		// and sweep unused template copies every 2s, as they are that old.
		mgr, err := env.StartOperatorWithHooks(seams.Hooks{CRDPollInterval: 100 * time.Millisecond, TemplateGCGrace: 2 * time.Second}, controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mgr.Stop)
	})

	getOf := func(kind, name string) *unstructured.Unstructured {
		GinkgoHelper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(clusterapi.GroupVersion.WithKind(kind))
		Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: testenv.CAPINamespace, Name: name}, u)).To(Succeed())
		return u
	}
	get := func(name string) *unstructured.Unstructured { return getOf(bootimage.KindMachineSet, name) }
	refOfKind := func(kind, name string) func() string {
		return func() string {
			ref, err := clusterapi.InfrastructureRef(getOf(kind, name))
			Expect(err).NotTo(HaveOccurred())
			return ref.Name
		}
	}
	refOf := func(name string) func() string { return refOfKind(bootimage.KindMachineSet, name) }
	newest := func(name string) bootimage.Change {
		GinkgoHelper()
		h, err := bootimage.HistoryOf(get(name).GetAnnotations())
		Expect(err).NotTo(HaveOccurred())
		c, ok := h.Newest()
		Expect(ok).To(BeTrue())
		return c
	}
	// moved creates MachineSet name on template, of the old AMI, and returns the copy the
	// operator moves it to.
	moved := func(name string, template *unstructured.Unstructured) string {
		GinkgoHelper()
		installed := template.GetName()
		Expect(env.Client.Create(ctx, template)).To(Succeed())
		Expect(env.Client.Create(ctx, fixtures.ClusterAPIOwner(bootimage.KindMachineSet, name, installed))).To(Succeed())
		Eventually(refOf(name)).ShouldNot(Equal(installed))
		Expect(newest(name)).To(HaveField("Template", Equal(&bootimage.TemplateChange{From: installed, To: refOf(name)()})))
		return refOf(name)()
	}
	// unchanged is what a planned restore must leave: the owner's spec and annotations.
	unchanged := func(name string) func() []any {
		return func() []any {
			u := get(name)
			return []any{u.Object["spec"], u.GetAnnotations()}
		}
	}
	// ourCopy is a template of the old AMI labelled as the operator labels its copies for
	// MachineSet owner.
	ourCopy := func(name, owner string) *unstructured.Unstructured {
		t := fixtures.AWSMachineTemplate(name, fixtures.OldAWSAMI)
		t.SetLabels(clusterapi.TemplateCopyLabels(bootimage.KindMachineSet, owner))
		t.SetAnnotations(map[string]string{clusterapi.TemplateOwnerAnnotation: bootimage.KindMachineSet + "/" + owner})
		return t
	}
	templateExists := func(name string) func() error {
		return func() error {
			return env.Client.Get(ctx, client.ObjectKey{Namespace: testenv.CAPINamespace, Name: name}, fixtures.AWSMachineTemplate(name, ""))
		}
	}
	// notRestored checks that no restore was written to MachineSet name: no hold, and its newest
	// change is still the operator's.
	notRestored := func(name string) {
		GinkgoHelper()
		Expect(get(name).GetAnnotations()).NotTo(HaveKey(bootimage.HoldAnnotation))
		Expect(newest(name)).To(HaveField("By", bootimage.ByOperator))
	}
	reasons := func(name string) func() []string {
		return func() []string {
			list := &corev1.EventList{}
			Expect(env.Client.List(ctx, list, client.InNamespace(testenv.CAPINamespace))).To(Succeed())
			var out []string
			for _, e := range list.Items {
				if e.InvolvedObject.Kind == bootimage.KindMachineSet && e.InvolvedObject.Name == name {
					out = append(out, e.Reason)
				}
			}
			return out
		}
	}

	It("plans a restore without writing it, then points the owner back at the previous template and holds the image, which the operator honours until the hold is cleared", func() {
		// The owner is on an earlier copy of ours, which the collector may take once nothing needs it.
		copied := moved("r-ms", ourCopy("r-ms-aaaaaaaaaa", "r-ms"))
		before := unchanged("r-ms")()
		code, out, stderr := runCLI("restore", "machineset.cluster.x-k8s.io/r-ms", "--kubeconfig", kubeconfig)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`^machineset\.cluster\.x-k8s\.io/r-ms: template ` + copied + ` -> r-ms-aaaaaaaaaa, boot image ` +
			fixtures.NewAWSAMIUSEast1 + ` -> ` + fixtures.OldAWSAMI + ` \(undoes the change of \S+ by operator\); holds ` + fixtures.NewAWSAMIUSEast1 + `\n`))
		Expect(out).To(ContainSubstring("Nothing written. To write it: bootimagectl restore machineset.cluster.x-k8s.io/r-ms --apply"))
		Expect(unchanged("r-ms")()).To(Equal(before))

		code, out, stderr = runCLI("restore", "machineset.cluster.x-k8s.io/r-ms", "--apply", "--kubeconfig", kubeconfig)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Restored. Clear the hold with: oc annotate machineset.cluster.x-k8s.io/r-ms -n openshift-cluster-api " + bootimage.HoldAnnotation + "-"))
		Expect(refOf("r-ms")()).To(Equal("r-ms-aaaaaaaaaa"))
		Expect(newest("r-ms")).To(And(HaveField("By", bootimage.ByHand), HaveField("From", fixtures.NewAWSAMIUSEast1), HaveField("To", fixtures.OldAWSAMI)))
		hold, held, err := bootimage.HoldOf(get("r-ms").GetAnnotations())
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(BeTrue())
		Expect(hold).To(And(HaveField("Target", fixtures.NewAWSAMIUSEast1), HaveField("Restored", fixtures.OldAWSAMI), HaveField("By", bootimage.ByHand)))

		// The collector keeps the template the owner names again. The barrier: a copy made later
		// for no owner, which only the sweep collects; once it is gone, a sweep has seen the
		// earlier copy old enough to go.
		Expect(env.Client.Create(ctx, ourCopy("r-barrier-aaaaaaaaaa", "r-barrier"))).To(Succeed())
		Eventually(templateExists("r-barrier-aaaaaaaaaa")).Should(Satisfy(apierrors.IsNotFound))
		Expect(templateExists("r-ms-aaaaaaaaaa")()).To(Succeed(), "kept: the owner names it")

		// The operator says it holds the owner there, and does not move it.
		Eventually(reasons("r-ms")).Should(ContainElement(bootimage.ReasonBootImageHeld))
		Consistently(refOf("r-ms"), 2*time.Second, 100*time.Millisecond).Should(Equal("r-ms-aaaaaaaaaa"))
		code, out, _ = runCLI("plan", "--kubeconfig", kubeconfig, "--aws-images", writeAMIs())
		Expect(code).To(Equal(0), out)
		Expect(out).To(MatchRegexp(`(?m)^machineset\.cluster\.x-k8s\.io/r-ms +Skip +BootImageHeld `))

		code, _, stderr = runCLI("restore", "machineset.cluster.x-k8s.io/r-ms", "--kubeconfig", kubeconfig)
		Expect(code).To(Equal(exitUnusable), "a restore is not undone by another")
		Expect(stderr).To(ContainSubstring("no boot image change to undo"))

		// The one command the output names: oc annotate ... hold-, as a merge patch.
		cleared := get("r-ms")
		Expect(env.Client.Patch(ctx, cleared, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+bootimage.HoldAnnotation+`":null}}}`)))).To(Succeed())
		Eventually(refOf("r-ms")).Should(Equal(copied))
		Expect(newest("r-ms")).To(And(HaveField("By", bootimage.ByOperator), HaveField("To", fixtures.NewAWSAMIUSEast1)))
	})

	It("refuses, writing nothing, an owner someone moved to another template since the change", func() {
		copied := moved("r-moved", fixtures.AWSMachineTemplate("r-moved-0a1b2c3d", fixtures.OldAWSAMI))
		// Their template has the target's AMI, so the operator leaves the owner on it.
		Expect(env.Client.Create(ctx, fixtures.AWSMachineTemplate("r-moved-theirs", fixtures.NewAWSAMIUSEast1))).To(Succeed())
		owner := get("r-moved")
		Expect(unstructured.SetNestedField(owner.Object, "r-moved-theirs", "spec", "template", "spec", "infrastructureRef", "name")).To(Succeed())
		Expect(env.Client.Update(ctx, owner)).To(Succeed())

		code, out, stderr := runCLI("restore", "machineset.cluster.x-k8s.io/r-moved", "--apply", "--kubeconfig", kubeconfig)
		Expect(code).To(Equal(exitUnusable))
		Expect(out).To(BeEmpty())
		Expect(stderr).To(ContainSubstring("machineset.cluster.x-k8s.io/r-moved: it names template r-moved-theirs, not " + copied + " which the newest change moved it to"))
		Expect(refOf("r-moved")()).To(Equal("r-moved-theirs"))
		notRestored("r-moved")
	})

	It("refuses, writing nothing, when the template the change moved the owner from is gone", func() {
		copied := moved("r-gone", fixtures.AWSMachineTemplate("r-gone-0a1b2c3d", fixtures.OldAWSAMI))
		Expect(env.Client.Delete(ctx, fixtures.AWSMachineTemplate("r-gone-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
		Eventually(templateExists("r-gone-0a1b2c3d")).Should(Satisfy(apierrors.IsNotFound))

		code, out, stderr := runCLI("restore", "machineset.cluster.x-k8s.io/r-gone", "--apply", "--kubeconfig", kubeconfig)
		Expect(code).To(Equal(exitUnusable))
		Expect(out).To(BeEmpty())
		Expect(stderr).To(ContainSubstring("machineset.cluster.x-k8s.io/r-gone: template AWSMachineTemplate openshift-cluster-api/r-gone-0a1b2c3d, which the newest change moved it from, is not found"))
		Expect(refOf("r-gone")()).To(Equal(copied))
		notRestored("r-gone")
	})

	It("points a MachineDeployment back at its previous template too, and holds the image", func() {
		Expect(env.Client.Create(ctx, fixtures.AWSMachineTemplate("r-md-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
		Expect(env.Client.Create(ctx, fixtures.ClusterAPIOwner(bootimage.KindMachineDeployment, "r-md", "r-md-0a1b2c3d"))).To(Succeed())
		md := getOf(bootimage.KindMachineDeployment, "r-md")
		Expect(unstructured.SetNestedField(md.Object, map[string]any{"observedGeneration": md.GetGeneration(), "replicas": int64(2)}, "status")).To(Succeed())
		Expect(env.Client.Status().Update(ctx, md)).To(Succeed())
		ref := refOfKind(bootimage.KindMachineDeployment, "r-md")
		Eventually(ref).ShouldNot(Equal("r-md-0a1b2c3d"))
		copied := ref()

		code, out, stderr := runCLI("restore", "machinedeployment.cluster.x-k8s.io/r-md", "--apply", "--kubeconfig", kubeconfig)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(HavePrefix("machinedeployment.cluster.x-k8s.io/r-md: template " + copied + " -> r-md-0a1b2c3d, boot image " + fixtures.NewAWSAMIUSEast1 + " -> " + fixtures.OldAWSAMI))
		Expect(out).To(ContainSubstring("Restored. Clear the hold with: oc annotate machinedeployment.cluster.x-k8s.io/r-md -n openshift-cluster-api " + bootimage.HoldAnnotation + "-"))
		Expect(ref()).To(Equal("r-md-0a1b2c3d"))
		hold, held, err := bootimage.HoldOf(getOf(bootimage.KindMachineDeployment, "r-md").GetAnnotations())
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(BeTrue())
		Expect(hold).To(And(HaveField("Target", fixtures.NewAWSAMIUSEast1), HaveField("By", bootimage.ByHand)))
	})
})
