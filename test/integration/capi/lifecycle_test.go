package capi_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
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

// Issue 36: the template copies' life on the real kube-apiserver, on a control plane of its own.
// Ordered only to share that control plane and one operator; each spec makes its own objects and
// runs alone.
var _ = Describe("Cluster API template copies through their life", Ordered, func() {
	var (
		c        client.Client
		own      *testenv.Env
		mgr      *testenv.Manager
		failOnce sync.Map // owner name -> struct{}: its next owner patch fails, before it is sent
	)
	// The grace of unused copies, and the period of the sweep.
	const copyGrace = 2 * time.Second
	managed := map[string]string{"bootimage.example.com/managed": "yes"}
	start := func() {
		GinkgoHelper()
		var err error
		hooks := seams.Hooks{CRDPollInterval: 100 * time.Millisecond, TemplateGCGrace: copyGrace,
			BeforeOwnerPatch: func(_ context.Context, o client.Object) error {
				if _, fail := failOnce.LoadAndDelete(o.GetName()); fail {
					return errors.New("stopped before the owner patch, as by a crash")
				}
				return nil
			}}
		mgr, err = own.StartOperatorWithHooks(hooks, controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds()})
		Expect(err).NotTo(HaveOccurred())
	}
	BeforeAll(func() {
		own = testenv.StartForSpecs(testenv.Options{CAPI: true})
		c = own.Client
		selected := fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.Partial)
		selected.Selection.Partial = &operatorv1.PartialSelector{MachineResourceSelector: &metav1.LabelSelector{MatchLabels: managed}}
		Expect(fixtures.Create(ctx, c, append(fixtures.ClusterAPIOnAWS(selected),
			fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion))...)).To(Succeed())
		start()
		DeferCleanup(func() { _ = mgr.Stop() })
	})

	getIn := func(obj *unstructured.Unstructured) *unstructured.Unstructured { return stored(c, obj) }
	refOf := func(owner *unstructured.Unstructured) func() string {
		return func() string {
			return fmt.Sprint(field(getIn(owner).Object, "spec", "template", "spec", "infrastructureRef", "name"))
		}
	}
	// selectedOwner creates the MachineSet name on a template of its own with the old AMI,
	// selected, and returns it with the name of that template.
	selectedOwner := func(name string) (*unstructured.Unstructured, string) {
		GinkgoHelper()
		installed := name + "-0a1b2c3d"
		Expect(c.Create(ctx, fixtures.AWSMachineTemplate(installed, fixtures.OldAWSAMI))).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", name, installed)
		owner.SetLabels(managed)
		Expect(c.Create(ctx, owner)).To(Succeed())
		return owner, installed
	}
	// updated waits for owner to name a copy of its template, and returns the copy's name.
	updated := func(owner *unstructured.Unstructured, installed string) string {
		GinkgoHelper()
		Eventually(refOf(owner)).ShouldNot(Equal(installed))
		return refOf(owner)()
	}
	// earlierCopy creates what an earlier update of owner left: its copy of an older image, which
	// nothing names.
	earlierCopy := func(owner string) *unstructured.Unstructured {
		GinkgoHelper()
		t := fixtures.AWSMachineTemplate(owner+"-aaaaaaaaaa", fixtures.OldAWSAMI)
		t.SetLabels(clusterapi.TemplateCopyLabels("MachineSet", owner))
		t.SetAnnotations(map[string]string{clusterapi.TemplateOwnerAnnotation: "MachineSet/" + owner})
		Expect(c.Create(ctx, t)).To(Succeed())
		return t
	}
	exists := func(name string) func() error {
		return func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: testenv.CAPINamespace, Name: name}, template(name))
		}
	}
	notFound := Satisfy(apierrors.IsNotFound)
	eventsOf := func(name string) func() []string { return func() []string { return eventsIn(c, "MachineSet", name) } }

	It("collects the copies of a deleted MachineSet, and of one deleted while the operator was down", func() {
		owner, installed := selectedOwner("l-del")
		copied := updated(owner, installed)
		Expect(c.Delete(ctx, owner)).To(Succeed())
		Eventually(exists(copied)).Should(notFound)
		Expect(exists(installed)()).To(Succeed(), "cluster-capi-operator's template is never ours to delete")

		owner, installed = selectedOwner("l-down")
		copied = updated(owner, installed)
		Expect(mgr.Stop()).To(Succeed())
		Expect(c.Delete(ctx, owner)).To(Succeed())
		start()
		Eventually(exists(copied)).Should(notFound, "the sweep at start finds what no event said")
	})

	It("collects the older copies of MachineSets it no longer updates: deselected, now of a MachineDeployment, on another template kind", func() {
		type leak struct {
			owner          *unstructured.Unstructured
			current, older string
		}
		change := map[string]func(*unstructured.Unstructured){
			"l-desel": func(o *unstructured.Unstructured) { o.SetLabels(nil) },
			"l-md": func(o *unstructured.Unstructured) {
				o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Name: "d", UID: "u-1", Controller: ptr.To(true)}})
			},
			"l-kind": func(o *unstructured.Unstructured) {
				Expect(client.IgnoreAlreadyExists(c.Create(ctx, fixtures.ClusterAPIObject(`
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: GCPMachineTemplate
metadata: {name: l-kind-gcp, namespace: `+testenv.CAPINamespace+`}
spec: {template: {spec: {instanceType: n2-standard-4, image: projects/rhcos-cloud/global/images/old}}}`)))).To(Succeed())
				Expect(unstructured.SetNestedStringMap(o.Object, map[string]string{"apiGroup": clusterapi.InfrastructureGroup, "kind": "GCPMachineTemplate", "name": "l-kind-gcp"},
					"spec", "template", "spec", "infrastructureRef")).To(Succeed())
			},
		}
		reason := map[string]string{"l-desel": bootimage.ReasonNotSelected, "l-md": bootimage.ReasonOwnedByMachineDeployment, "l-kind": bootimage.ReasonUnsupportedTemplate}
		leaks := map[string]leak{}
		for name, mutate := range change {
			owner, installed := selectedOwner(name)
			current := updated(owner, installed)
			// The operator may still be writing the owner (its history, a verification): retry on
			// a conflict, as a person's edit would.
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				live := getIn(owner)
				mutate(live)
				return c.Update(ctx, live)
			})).To(Succeed())
			Eventually(eventsOf(name)).Should(ContainElement(HavePrefix(reason[name]+": ")), name)
			leaks[name] = leak{owner: owner, current: current, older: earlierCopy(name).GetName()}
		}
		for name, l := range leaks {
			Eventually(exists(l.older)).Should(notFound, name)
			if name != "l-kind" {
				Expect(exists(l.current)()).To(Succeed(), name+" still names it")
			}
		}
		Eventually(exists(leaks["l-kind"].current)).Should(notFound, "nothing names it since the owner moved to another kind")
	})

	It("reuses its own copy after a failed owner patch although the server added to its spec", func() {
		// As a provider's defaulting webhook does: a field the copy did not set, on every copy.
		policy := &admissionregistrationv1.MutatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "default-copies"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{clusterapi.InfrastructureGroup}, APIVersions: []string{"*"}, Resources: []string{"awsmachinetemplates"}},
					},
				}}},
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "copies", Expression: fmt.Sprintf("has(object.metadata.labels) && '%s' in object.metadata.labels", clusterapi.TemplateCopyLabel)}},
				Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch, JSONPatch: &admissionregistrationv1.JSONPatch{
					Expression: `[JSONPatch{op: "add", path: "/spec/template/spec/uncompressedUserData", value: true}]`,
				}}},
			},
		}
		binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "default-copies"},
			Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "default-copies"},
		}
		Expect(c.Create(ctx, policy)).To(Succeed())
		Expect(c.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() {
			Expect(c.Delete(ctx, binding)).To(Succeed())
			Expect(c.Delete(ctx, policy)).To(Succeed())
		})
		probe := fixtures.AWSMachineTemplate("l-probe", fixtures.OldAWSAMI)
		probe.SetLabels(map[string]string{clusterapi.TemplateCopyLabel: "true"})
		Eventually(func() any {
			Expect(client.IgnoreAlreadyExists(c.Create(ctx, probe.DeepCopy(), client.DryRunAll))).To(Succeed())
			dry := probe.DeepCopy()
			Expect(c.Create(ctx, dry, client.DryRunAll)).To(Succeed())
			return field(dry.Object, "spec", "template", "spec", "uncompressedUserData")
		}).Should(Equal(true), "the policy is in force")

		failOnce.Store("l-dflt", struct{}{})
		owner, installed := selectedOwner("l-dflt")
		copied := updated(owner, installed)
		Expect(field(getIn(template(copied)).Object, "spec", "template", "spec", "uncompressedUserData")).To(Equal(true), "the copy as stored differs from the one computed")
		Expect(eventsOf("l-dflt")()).NotTo(ContainElement(HavePrefix(bootimage.ReasonTemplateConflict)))
		_, pending := failOnce.Load("l-dflt")
		Expect(pending).To(BeFalse(), "a first patch was stopped")
	})

	It("leaves the objects of a paused Cluster and their copies alone, and updates them once it is resumed", func() {
		cluster := fixtures.ClusterAPIObject(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: l-paused}
spec: {paused: true}`)
		cluster.SetNamespace(testenv.CAPINamespace)
		Expect(c.Create(ctx, cluster)).To(Succeed())
		Expect(c.Create(ctx, fixtures.AWSMachineTemplate("l-p-0a1b2c3d", fixtures.OldAWSAMI))).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", "l-p", "l-p-0a1b2c3d")
		owner.SetLabels(managed)
		Expect(unstructured.SetNestedField(owner.Object, "l-paused", "spec", "clusterName")).To(Succeed())
		Expect(unstructured.SetNestedField(owner.Object, "l-paused", "spec", "template", "spec", "clusterName")).To(Succeed())
		older := earlierCopy("l-p")
		Expect(c.Create(ctx, owner)).To(Succeed())
		Eventually(eventsOf("l-p")).Should(ContainElement(HavePrefix(bootimage.ReasonPaused + ": Boot image update skipped: MachineSet " + testenv.CAPINamespace + "/l-p is paused (Cluster l-paused has spec.paused)")))

		// The barrier: a copy made later for no owner, which only the sweep collects. Once it is
		// gone, a sweep has seen the older copy old enough to go, and kept it.
		canary := fixtures.AWSMachineTemplate("l-canary-aaaaaaaaaa", fixtures.OldAWSAMI)
		canary.SetLabels(clusterapi.TemplateCopyLabels("MachineSet", "l-canary"))
		canary.SetAnnotations(map[string]string{clusterapi.TemplateOwnerAnnotation: "MachineSet/l-canary"})
		Expect(c.Create(ctx, canary)).To(Succeed())
		Eventually(exists(canary.GetName())).Should(notFound)
		Expect(exists(older.GetName())()).To(Succeed(), "a paused object's copies stay")
		Expect(refOf(owner)()).To(Equal("l-p-0a1b2c3d"))

		live := getIn(cluster)
		Expect(unstructured.SetNestedField(live.Object, false, "spec", "paused")).To(Succeed())
		Expect(c.Update(ctx, live)).To(Succeed())
		Eventually(refOf(owner)).ShouldNot(Equal("l-p-0a1b2c3d"))
		Eventually(exists(older.GetName())).Should(notFound)
	})
})
