package capi_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

const oldTemplate = "w-1a-0a1b2c3d"

func get(obj *unstructured.Unstructured) *unstructured.Unstructured {
	GinkgoHelper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
	return got
}

// field is the value at path in obj, nil when absent.
func field(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldCopy(obj, path...)
	return v
}

func templateOf(owner *unstructured.Unstructured) func() string {
	return func() string {
		name, _, _ := unstructured.NestedString(get(owner).Object, "spec", "template", "spec", "infrastructureRef", "name")
		return name
	}
}

func template(name string) *unstructured.Unstructured {
	t := &unstructured.Unstructured{}
	t.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
	t.SetKind("AWSMachineTemplate")
	t.SetNamespace(testenv.CAPINamespace)
	t.SetName(name)
	return t
}

func events(kind, name string) func() []string {
	return func() []string { return eventsIn(k8s, kind, name) }
}

// eventsIn lists "reason: message" of the Events about kind name in openshift-cluster-api of c.
func eventsIn(c client.Client, kind, name string) []string {
	list := &corev1.EventList{}
	Expect(c.List(ctx, list, client.InNamespace(testenv.CAPINamespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

func list(apiVersion, kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(apiVersion)
	l.SetKind(kind + "List")
	return l
}

// resync makes every controller take its objects again without changing what they decide on.
func resync() {
	GinkgoHelper()
	Expect(testenv.Resync(ctx, k8s)).To(Succeed())
}

// idle asserts that a resync of controller writes nothing to obj.
func idle(obj *unstructured.Unstructured, controller string) {
	GinkgoHelper()
	writes, err := env.WatchWrites(ctx, list(obj.GetAPIVersion(), obj.GetKind()), client.InNamespace(obj.GetNamespace()))
	Expect(err).NotTo(HaveOccurred())
	defer writes.Stop()
	before, err := testenv.Reconciles(controller)
	Expect(err).NotTo(HaveOccurred())
	resync()
	Eventually(func() (float64, error) { return testenv.Reconciles(controller) }).Should(BeNumerically(">", before))
	seen, err := writes.Barrier(ctx, k8s, obj)
	Expect(err).NotTo(HaveOccurred())
	Expect(seen).To(BeEmpty(), "written while idle")
}

// beforeOwnerPatch, when set, runs between a Cluster API owner's decision and its patch.
var beforeOwnerPatch atomic.Pointer[func(context.Context, client.Object) error]

// Ordered only to share one operator, started in BeforeAll; each spec makes its own objects and
// runs alone (-ginkgo.focus).
var _ = Describe("The operator on Cluster API objects", Ordered, func() {
	var mgr *testenv.Manager
	// metrics are those of the operator started last.
	var metrics *prometheus.Registry
	clk := clocktesting.NewFakeClock(time.Now())
	start := func() {
		GinkgoHelper()
		var err error
		metrics = prometheus.NewRegistry()
		hooks := seams.Hooks{CRDPollInterval: 100 * time.Millisecond, BeforeOwnerPatch: func(ctx context.Context, o client.Object) error {
			if f := beforeOwnerPatch.Load(); f != nil {
				return (*f)(ctx, o)
			}
			return nil
		}}
		mgr, err = env.StartOperatorWithHooks(hooks,
			controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds(), Clock: clk, Metrics: metrics})
		Expect(err).NotTo(HaveOccurred())
	}
	stop := func() {
		GinkgoHelper()
		Expect(mgr.Stop()).To(Succeed())
	}
	// updatedOwner creates the MachineSet name on a template of its own with the old AMI, waits
	// for the operator to point it at its copy, and returns it with the installed template's name:
	// each spec that starts from an updated object has one of its own, so that it runs alone.
	updatedOwner := func(name string) (*unstructured.Unstructured, string) {
		GinkgoHelper()
		installed := name + "-0a1b2c3d"
		Expect(k8s.Create(ctx, fixtures.AWSMachineTemplate(installed, fixtures.OldAWSAMI))).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", name, installed)
		Expect(k8s.Create(ctx, owner)).To(Succeed())
		Eventually(templateOf(owner)).ShouldNot(Equal(installed))
		return get(owner), installed
	}

	BeforeAll(func() {
		capiEntries := []operatorv1.MachineManager{
			fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All), fixtures.ClusterAPIManager(bootimage.MachineDeployments, operatorv1.All),
		}
		Expect(fixtures.Create(ctx, k8s, append(fixtures.ClusterAPIOnAWS(capiEntries...),
			fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion))...)).To(Succeed())
		start()
		DeferCleanup(func() { _ = mgr.Stop() })
	})

	It("copies the template with the new AMI, keeps every other field, and points the MachineSet at it: one create, one patch", func() {
		Expect(k8s.Create(ctx, fixtures.AWSMachineTemplate(oldTemplate, fixtures.OldAWSAMI))).To(Succeed())
		templates, err := env.WatchWrites(ctx, list("infrastructure.cluster.x-k8s.io/v1beta2", "AWSMachineTemplate"), client.InNamespace(testenv.CAPINamespace))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(templates.Stop)
		owner := fixtures.ClusterAPIOwner("MachineSet", "w-1a", oldTemplate)
		Expect(k8s.Create(ctx, owner)).To(Succeed())
		owners, err := env.WatchWrites(ctx, list("cluster.x-k8s.io/v1beta2", "MachineSet"), client.InNamespace(testenv.CAPINamespace))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(owners.Stop)

		Eventually(templateOf(owner)).ShouldNot(Equal(oldTemplate))
		copied := get(template(templateOf(owner)()))
		Expect(field(copied.Object, "spec", "template", "spec", "ami", "id")).To(Equal(fixtures.NewAWSAMIUSEast1))
		Expect(field(copied.Object, "spec", "template", "spec", "capacityReservationPreference")).To(Equal("Open"))
		Expect(field(copied.Object, "spec", "template", "spec", "additionalTags")).To(Equal(map[string]any{"team": "compute"}))
		Expect(copied.GetLabels()).To(Equal(clusterapi.TemplateCopyLabels("MachineSet", "w-1a")), "not cluster-capi-operator's label")
		Expect(get(owner).GetAnnotations()).To(HaveKey(bootimage.AttemptsAnnotation), "the bookkeeping rides in the same patch")
		Eventually(events("MachineSet", "w-1a")).Should(ContainElement(ContainSubstring("BootImageUpdated: Updated boot image from " + fixtures.OldAWSAMI + " to " + fixtures.NewAWSAMIUSEast1)))

		seen, err := owners.Barrier(ctx, k8s, owner)
		Expect(err).NotTo(HaveOccurred())
		Expect(seen).To(HaveLen(1), "one patch of the MachineSet")
		Expect(templates.Of(client.ObjectKeyFromObject(copied))).To(HaveLen(1), "one create of the copy")

		By("writing nothing more while nothing changes")
		idle(get(owner), "clusterapi-machineset")
		Expect(templates.Of(client.ObjectKeyFromObject(copied))).To(HaveLen(1))

		By("writing nothing after a restart")
		stop()
		start()
		idle(get(owner), "clusterapi-machineset")
	})

	It("reuses the copy a pass made before it stopped short of the patch", func() {
		owner, installed := updatedOwner("r-1a")
		copyName := templateOf(owner)()
		// What a crash between the two writes leaves: the copy, and the owner on the old template.
		stop()
		Expect(unstructured.SetNestedField(owner.Object, installed, "spec", "template", "spec", "infrastructureRef", "name")).To(Succeed())
		Expect(k8s.Update(ctx, owner)).To(Succeed())
		templates, err := env.WatchWrites(ctx, list("infrastructure.cluster.x-k8s.io/v1beta2", "AWSMachineTemplate"), client.InNamespace(testenv.CAPINamespace))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(templates.Stop)
		start()

		Eventually(templateOf(owner)).Should(Equal(copyName))
		seen, err := templates.Barrier(ctx, k8s, get(template(copyName)))
		Expect(err).NotTo(HaveOccurred())
		Expect(seen).To(BeEmpty(), "the copy is reused, not written again")
	})

	It("never overwrites a template of the copy's name with other content", func() {
		owner, installed := updatedOwner("x-1a")
		copyName := templateOf(owner)()
		stop()
		Expect(k8s.Delete(ctx, template(copyName))).To(Succeed())
		Eventually(func() error { return k8s.Create(ctx, fixtures.AWSMachineTemplate(copyName, fixtures.CustomAMI)) }).Should(Succeed())
		Expect(unstructured.SetNestedField(owner.Object, installed, "spec", "template", "spec", "infrastructureRef", "name")).To(Succeed())
		Expect(k8s.Update(ctx, owner)).To(Succeed())
		start()

		Eventually(events("MachineSet", "x-1a")).Should(ContainElement(ContainSubstring(bootimage.ReasonTemplateConflict + ": Boot image update failed: template " + testenv.CAPINamespace + "/" + copyName)))
		Expect(templateOf(owner)()).To(Equal(installed))
		Expect(field(get(template(copyName)).Object, "spec", "template", "spec", "ami", "id")).To(Equal(fixtures.CustomAMI))
		// Clear the clash for the next specs: the operator then makes its copy.
		Expect(k8s.Delete(ctx, template(copyName))).To(Succeed())
		resync()
		Eventually(templateOf(owner)).Should(Equal(copyName))
	})

	It("leaves a mirrored MachineSet to the side in charge", func() {
		Expect(k8s.Create(ctx, fixtures.AWSMachineTemplate("m-1b-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
		twin := fixtures.MachineSet("m-1b", fixtures.AWSProviderSpec("us-east-1", fixtures.NewAWSAMIUSEast1))
		Expect(k8s.Create(ctx, twin)).To(Succeed())
		// The migration controller's steps: MachineAPI, Migrating, ClusterAPI (the CRD refuses a
		// direct move between the two APIs). Each change re-decides the Cluster API MachineSet.
		authority := func(a machinev1beta1.MachineAuthority) {
			GinkgoHelper()
			twin.Status.AuthoritativeAPI = a
			Expect(k8s.Status().Update(ctx, twin)).To(Succeed())
		}
		authority(machinev1beta1.MachineAuthorityMachineAPI)
		owner := fixtures.ClusterAPIOwner("MachineSet", "m-1b", "m-1b-0a1b2c3d")
		Expect(k8s.Create(ctx, owner)).To(Succeed())
		Eventually(events("MachineSet", "m-1b")).Should(ContainElement(HavePrefix(bootimage.ReasonAuthorityMachineAPI + ": ")))

		authority(machinev1beta1.MachineAuthorityMigrating)
		Eventually(events("MachineSet", "m-1b")).Should(ContainElement(HavePrefix(bootimage.ReasonMigrating + ": ")))
		Expect(templateOf(owner)()).To(Equal("m-1b-0a1b2c3d"), "neither side is written while migrating")

		authority(machinev1beta1.MachineAuthorityClusterAPI)
		Eventually(templateOf(owner)).ShouldNot(Equal("m-1b-0a1b2c3d"), "ClusterAPI-authoritative: the Cluster API side is updated")
	})

	DescribeTable("leaves alone what another controller writes",
		func(name string, mutate func(*unstructured.Unstructured), reason string) {
			Expect(k8s.Create(ctx, fixtures.AWSMachineTemplate(name+"-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
			owner := fixtures.ClusterAPIOwner("MachineSet", name, name+"-0a1b2c3d")
			mutate(owner)
			Expect(k8s.Create(ctx, owner)).To(Succeed())
			Eventually(events("MachineSet", name)).Should(ContainElement(HavePrefix(reason + ": ")))
			Expect(templateOf(owner)()).To(Equal(name + "-0a1b2c3d"))
		},
		Entry("a MachineSet of a MachineDeployment", "o-md", func(o *unstructured.Unstructured) {
			o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Name: "d", UID: "u-1", Controller: ptr.To(true)}})
		}, bootimage.ReasonOwnedByMachineDeployment),
		Entry("an object of a ClusterClass topology", "o-topo", func(o *unstructured.Unstructured) {
			o.SetLabels(map[string]string{bootimage.TopologyOwnedLabel: ""})
		}, bootimage.ReasonManagedByTopology),
		Entry("a Windows MachineSet", "o-win", func(o *unstructured.Unstructured) {
			Expect(unstructured.SetNestedStringMap(o.Object, map[string]string{"pool": "o-win", bootimage.WindowsLabel: "Windows"}, "spec", "template", "metadata", "labels")).To(Succeed())
		}, bootimage.ReasonWindowsMachineSet),
	)

	It("takes the Cluster owner reference every OpenShift Cluster API object has as normal", func() {
		cluster := []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "demo", UID: "u-2", BlockOwnerDeletion: ptr.To(true)}}
		t := fixtures.AWSMachineTemplate("o-cluster-0a1b2c3d", fixtures.OldAWSAMI)
		t.SetOwnerReferences(cluster)
		Expect(k8s.Create(ctx, t)).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", "o-cluster", "o-cluster-0a1b2c3d")
		owner.SetOwnerReferences(cluster)
		Expect(k8s.Create(ctx, owner)).To(Succeed())
		Eventually(templateOf(owner)).ShouldNot(Equal("o-cluster-0a1b2c3d"))
		copied := get(template(templateOf(owner)()))
		Expect(copied.GetOwnerReferences()).To(ConsistOf(HaveField("Name", "demo")), "the template's owner, the Cluster")
		Expect(copied.GetOwnerReferences()[0].BlockOwnerDeletion).To(BeNil(), "no blockOwnerDeletion on the copy")
	})

	It("waits for a MachineDeployment's rollout, then updates it and says how many machines it replaces", func() {
		Expect(k8s.Create(ctx, fixtures.AWSMachineTemplate("d-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
		md := fixtures.ClusterAPIOwner("MachineDeployment", "d", "d-0a1b2c3d")
		Expect(k8s.Create(ctx, md)).To(Succeed())
		Eventually(events("MachineDeployment", "d")).Should(ContainElement(HavePrefix(bootimage.ReasonMachineDeploymentRollingOut + ": ")))
		Expect(templateOf(md)()).To(Equal("d-0a1b2c3d"))

		// Its controller catches up: three Machines, nothing rolling out.
		md = get(md)
		Expect(unstructured.SetNestedField(md.Object, map[string]any{
			"observedGeneration": md.GetGeneration(), "replicas": int64(3),
			"conditions": []any{map[string]any{"type": "RollingOut", "status": "False", "reason": "NotRollingOut", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}},
		}, "status")).To(Succeed())
		Expect(k8s.Status().Update(ctx, md)).To(Succeed())
		Eventually(templateOf(md)).ShouldNot(Equal("d-0a1b2c3d"))
		Eventually(events("MachineDeployment", "d")).Should(ContainElement(HaveSuffix("; rolls 3 machines")))
	})

	It("deletes only this operator's copies that nothing uses, once they are old enough", func() {
		owner, installed := updatedOwner("g-1a")
		current := templateOf(owner)()
		copyFor := func(name string, labels map[string]string, owner string) *unstructured.Unstructured {
			t := fixtures.AWSMachineTemplate(name, fixtures.OldAWSAMI)
			t.SetLabels(labels)
			t.SetAnnotations(map[string]string{clusterapi.TemplateOwnerAnnotation: owner})
			return t
		}
		ours := func(name string) *unstructured.Unstructured {
			return copyFor(name, clusterapi.TemplateCopyLabels("MachineSet", "g-1a"), "MachineSet/g-1a")
		}
		unused, usedByMachine := ours("g-1a-aaaaaaaaaa"), ours("g-1a-bbbbbbbbbb")
		// Selected by g-1a's label, but the annotation, which decides, names another owner.
		labelledOnly := copyFor("g-1a-cccccccccc", clusterapi.TemplateCopyLabels("MachineSet", "g-1a"), "MachineSet/w-9z")
		Expect(k8s.Create(ctx, unused)).To(Succeed())
		Expect(k8s.Create(ctx, usedByMachine)).To(Succeed())
		Expect(k8s.Create(ctx, labelledOnly)).To(Succeed())
		machine := fixtures.ClusterAPIObject(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  name: g-1a-x7k2p
  annotations: {cluster.x-k8s.io/cloned-from-name: g-1a-bbbbbbbbbb}
spec:
  clusterName: demo
  bootstrap: {dataSecretName: worker-user-data}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AWSMachine, name: g-1a-x7k2p}`)
		Expect(k8s.Create(ctx, machine)).To(Succeed())

		resync()
		// A window, not a barrier: a collection pass that keeps everything is visible nowhere (no
		// write, no Event), and the copies reach the operator through another informer than g-1a.
		Consistently(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(unused), template(unused.GetName())) }, "1s").Should(Succeed(), "too young to go")

		// Past the grace of copies made just now, however long the suite ran before.
		clk.SetTime(time.Now().Add(clusterapi.TemplateGCGrace + time.Minute))
		resync()
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(unused), template(unused.GetName())) }).Should(MatchError(ContainSubstring("not found")))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(usedByMachine), template(usedByMachine.GetName()))).To(Succeed(), "a Machine was cloned from it")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(labelledOnly), template(labelledOnly.GetName()))).To(Succeed(), "its annotation names another owner")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: testenv.CAPINamespace, Name: current}, template(current))).To(Succeed(), "the one in use")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: testenv.CAPINamespace, Name: installed}, template(installed))).To(Succeed(), "cluster-capi-operator's, never ours to delete")

		Expect(k8s.Delete(ctx, machine)).To(Succeed())
		resync()
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKeyFromObject(usedByMachine), template(usedByMachine.GetName()))
		}).Should(MatchError(ContainSubstring("not found")))
	})

	It("patches an owner only at the version it decided on, and keeps the annotations another writer set meanwhile", func() {
		Expect(k8s.Create(ctx, fixtures.AWSMachineTemplate("c-1a-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", "c-1a", "c-1a-0a1b2c3d")
		var once sync.Once
		hook := func(ctx context.Context, o client.Object) error {
			var err error
			if o.GetName() != "c-1a" {
				return nil
			}
			// Another writer, between the decision (no annotations) and the patch.
			once.Do(func() {
				live := &unstructured.Unstructured{}
				live.SetGroupVersionKind(owner.GroupVersionKind())
				if err = k8s.Get(ctx, client.ObjectKeyFromObject(owner), live); err == nil {
					live.SetAnnotations(map[string]string{"example.com/keep": "yes"})
					err = k8s.Update(ctx, live)
				}
			})
			return err
		}
		beforeOwnerPatch.Store(&hook)
		DeferCleanup(func() { beforeOwnerPatch.Store(nil) })
		Expect(k8s.Create(ctx, owner)).To(Succeed())

		Eventually(templateOf(owner)).ShouldNot(Equal("c-1a-0a1b2c3d"))
		Expect(get(owner).GetAnnotations()).To(And(HaveKeyWithValue("example.com/keep", "yes"), HaveKey(bootimage.AttemptsAnnotation)),
			"the stale patch was refused, and the one decided again kept the map it read")
	})

	It("leaves a paused object alone, and updates it once it is resumed", func() {
		Expect(k8s.Create(ctx, fixtures.AWSMachineTemplate("z-1a-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", "z-1a", "z-1a-0a1b2c3d")
		owner.SetAnnotations(map[string]string{clusterapi.PausedAnnotation: ""})
		Expect(k8s.Create(ctx, owner)).To(Succeed())
		Eventually(events("MachineSet", "z-1a")).Should(ContainElement(HavePrefix(bootimage.ReasonPaused + ": ")))
		Expect(templateOf(owner)()).To(Equal("z-1a-0a1b2c3d"))

		live := get(owner)
		live.SetAnnotations(nil)
		Expect(k8s.Update(ctx, live)).To(Succeed())
		Eventually(templateOf(owner)).ShouldNot(Equal("z-1a-0a1b2c3d"))
	})

	It("takes a refusal by a ValidatingAdmissionPolicy (422) as a Skip in the policy's words, not a failure", func() {
		// As openshift-cluster-api-deny-unsupported-resources refuses every MachineDeployment write
		// on 4.23: here updates of MachineSets named p-*, and creates of p-probe as the barrier.
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "deny-p"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"cluster.x-k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"machinesets"}},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{
					Expression: "request.operation == 'CREATE' ? object.metadata.name != 'p-probe' : !object.metadata.name.startsWith('p-')",
					Message:    "This resource type is not supported in OpenShift and cannot be created, updated, or deleted.",
				}},
			},
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "deny-p"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "deny-p",
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		}
		Expect(k8s.Create(ctx, policy)).To(Succeed())
		Expect(k8s.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, binding))).To(Succeed())
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, policy))).To(Succeed())
		})
		Eventually(func() error {
			return k8s.Create(ctx, fixtures.ClusterAPIOwner("MachineSet", "p-probe", "p-0a1b2c3d"), client.DryRunAll)
		}).Should(MatchError(ContainSubstring("denied request")), "the policy is in force")

		var patches atomic.Int32
		hook := func(_ context.Context, o client.Object) error {
			if o.GetName() == "p-1a" {
				patches.Add(1)
			}
			return nil
		}
		beforeOwnerPatch.Store(&hook)
		DeferCleanup(func() { beforeOwnerPatch.Store(nil) })
		Expect(k8s.Create(ctx, fixtures.AWSMachineTemplate("p-1a-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", "p-1a", "p-1a-0a1b2c3d")
		Expect(k8s.Create(ctx, owner)).To(Succeed())
		Eventually(events("MachineSet", "p-1a")).Should(ContainElement(And(
			HavePrefix(bootimage.ReasonDeniedByPolicy+": "),
			ContainSubstring("ValidatingAdmissionPolicy 'deny-p' with binding 'deny-p' denied request"),
			ContainSubstring("This resource type is not supported in OpenShift"))))
		Expect(templateOf(owner)()).To(Equal("p-1a-0a1b2c3d"))
		Eventually(func() (float64, error) {
			return testenv.Metric(metrics, "bootimage_decisions", "kind", "MachineSet.cluster.x-k8s.io", "action", "Skip", "reason", bootimage.ReasonDeniedByPolicy)
		}).Should(BeNumerically(">=", 1), "a decision taken, not an error retried with backoff")

		By("not sending it again while neither the object nor the inputs change")
		sent := patches.Load()
		Expect(sent).To(BeNumerically(">=", 1))
		// A resync takes every MachineSet again: as many reconciles as there are MachineSets.
		owners := list("cluster.x-k8s.io/v1beta2", "MachineSet")
		Expect(k8s.List(ctx, owners, client.InNamespace(testenv.CAPINamespace))).To(Succeed())
		before, err := testenv.Reconciles("clusterapi-machineset")
		Expect(err).NotTo(HaveOccurred())
		resync()
		Eventually(func() (float64, error) { return testenv.Reconciles("clusterapi-machineset") }).Should(BeNumerically(">=", before+float64(len(owners.Items))))
		Expect(patches.Load()).To(Equal(sent), "the refused patch is not sent again")

		By("trying again on a change of the object, once the policy is gone")
		Expect(k8s.Delete(ctx, binding)).To(Succeed())
		Expect(k8s.Delete(ctx, policy)).To(Succeed())
		Eventually(func() error {
			live := get(owner)
			live.SetLabels(map[string]string{"example.com/touched": "yes"})
			return k8s.Update(ctx, live)
		}).Should(Succeed())
		Eventually(templateOf(owner)).ShouldNot(Equal("p-1a-0a1b2c3d"))
		Expect(patches.Load()).To(BeNumerically(">", sent))
	})

	It("counts Cluster API objects apart from Machine API ones in its metrics", func() {
		metric := func(name string, labels ...string) func() (float64, error) {
			return func() (float64, error) { return testenv.Metric(metrics, name, labels...) }
		}
		// Every figure is taken before, so that what earlier specs counted does not make it true.
		now := func(name string, labels ...string) float64 {
			GinkgoHelper()
			v, err := metric(name, labels...)()
			Expect(err).NotTo(HaveOccurred())
			return v
		}
		capiUpdates := []string{"kind", "MachineSet.cluster.x-k8s.io"}
		upToDate := []string{"kind", "MachineSet.cluster.x-k8s.io", "action", "NoChange", "reason", bootimage.ReasonUpToDate, "stream", "rhel-9"}
		rollingOut := []string{"kind", "MachineDeployment.cluster.x-k8s.io", "action", "Skip", "reason", bootimage.ReasonMachineDeploymentRollingOut, "stream", "rhel-9"}
		machineAPIUpdates, updatesBefore, upToDateBefore, rollingOutBefore := now("bootimage_updates_total", "kind", "MachineSet"),
			now("bootimage_updates_total", capiUpdates...), now("bootimage_decisions", upToDate...), now("bootimage_decisions", rollingOut...)
		Expect(k8s.Create(ctx, fixtures.AWSMachineTemplate("o-metrics-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", "o-metrics", "o-metrics-0a1b2c3d")
		Expect(k8s.Create(ctx, owner)).To(Succeed())
		Eventually(templateOf(owner)).ShouldNot(Equal("o-metrics-0a1b2c3d"))

		Eventually(metric("bootimage_updates_total", capiUpdates...)).Should(Equal(updatesBefore + 1))
		Eventually(metric("bootimage_decisions", upToDate...)).Should(Equal(upToDateBefore + 1))
		// A MachineDeployment whose controller has not caught up yet: skipped until its rollout ends.
		Expect(k8s.Create(ctx, fixtures.ClusterAPIOwner("MachineDeployment", "o-metrics-md", "o-metrics-0a1b2c3d"))).To(Succeed())
		Eventually(metric("bootimage_decisions", rollingOut...)).Should(Equal(rollingOutBefore+1), "MachineDeployments are counted too")
		Expect(metric("bootimage_updates_total", "kind", "MachineSet")()).To(Equal(machineAPIUpdates), "not counted as a Machine API MachineSet")
	})
})
