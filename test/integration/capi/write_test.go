package capi_test

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/internal/capi"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// The two writes of an update, on the real API server with CAPA's CRD.
var _ = Describe("Cluster API writes", func() {
	// A template with fields the CRD knows and this operator's code never names.
	const original = `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachineTemplate
metadata:
  name: w-1a-0a1b2c3d
  labels: {machine.openshift.io/cluster-api-machineset: w-1a}
spec:
  template:
    spec:
      instanceType: m6i.xlarge
      ami: {id: ami-0aaaaaaaaaaaaaa01}
      instanceMetadataOptions: {httpTokens: required, httpPutResponseHopLimit: 2, httpEndpoint: enabled, instanceMetadataTags: disabled}
      capacityReservationPreference: Open
      additionalTags: {team: compute}`

	var template, owner *unstructured.Unstructured
	BeforeEach(func() {
		template = object(original)
		Expect(k8s.Create(ctx, template)).To(Succeed())
		owner = object(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineSet
metadata: {name: w-1a}
spec:
  clusterName: demo
  selector: {matchLabels: {ms: w-1a}}
  template:
    metadata: {labels: {ms: w-1a}}
    spec:
      clusterName: demo
      bootstrap: {dataSecretName: worker-user-data}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AWSMachineTemplate, name: w-1a-0a1b2c3d}`)
		Expect(k8s.Create(ctx, owner)).To(Succeed())
		DeferCleanup(func() {
			Expect(k8s.DeleteAllOf(ctx, object(`{apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: AWSMachineTemplate}`), client.InNamespace(testenv.CAPINamespace))).To(Succeed())
			Expect(k8s.Delete(ctx, owner)).To(Succeed())
		})
	})

	// copyWith is the copy the domain would decide: the original with another AMI and name.
	copyWith := func(name, ami string) *unstructured.Unstructured {
		c := object(original)
		c.SetName(name)
		c.SetLabels(nil)
		Expect(unstructured.SetNestedField(c.Object, ami, "spec", "template", "spec", "ami", "id")).To(Succeed())
		return c
	}
	get := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
		return got
	}

	It("creates the copy with every field of the original, and reuses it on the next pass", func() {
		cp := copyWith("w-1a-5e6f7a8b", "ami-0f1e2d3c4b5a69788")
		created, err := capi.EnsureTemplate(ctx, k8s, cp)
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeTrue())
		stored := get(cp)
		Expect(stored.Object["spec"]).To(Equal(cp.Object["spec"]))
		Expect(unstructured.NestedString(stored.Object, "spec", "template", "spec", "capacityReservationPreference")).To(Equal("Open"))

		// A pass that stopped between create and patch: the next one finds its copy.
		created, err = capi.EnsureTemplate(ctx, k8s, cp)
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeFalse())
		Expect(get(cp).GetResourceVersion()).To(Equal(stored.GetResourceVersion()), "reused, not written")
	})

	It("never overwrites a template of the copy's name with another spec", func() {
		theirs := copyWith("w-1a-5e6f7a8b", "ami-0c0570c0570c05700")
		Expect(k8s.Create(ctx, theirs)).To(Succeed())
		_, err := capi.EnsureTemplate(ctx, k8s, copyWith("w-1a-5e6f7a8b", "ami-0f1e2d3c4b5a69788"))
		Expect(errors.Is(err, capi.ErrTemplateConflict)).To(BeTrue(), "%v", err)
		Expect(unstructured.NestedString(get(theirs).Object, "spec", "template", "spec", "ami", "id")).To(Equal("ami-0c0570c0570c05700"))
	})

	It("points the owner at the copy and records the bookkeeping in one patch", func() {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("cluster.x-k8s.io/v1beta2")
		list.SetKind("MachineSetList")
		writes, err := env.WatchWrites(ctx, list, client.InNamespace(testenv.CAPINamespace))
		Expect(err).NotTo(HaveOccurred())
		defer writes.Stop()

		annotations := map[string]string{"bootimage.openshift.io/update-attempts": `{"target":"ami-0f1e2d3c4b5a69788","count":1}`}
		Expect(capi.PointOwner(ctx, k8s, owner, "w-1a-0a1b2c3d", "w-1a-5e6f7a8b", annotations)).To(Succeed())
		stored := get(owner)
		Expect(unstructured.NestedString(stored.Object, "spec", "template", "spec", "infrastructureRef", "name")).To(Equal("w-1a-5e6f7a8b"))
		Expect(stored.GetAnnotations()).To(Equal(annotations))

		seen, err := writes.Barrier(ctx, k8s, owner)
		Expect(err).NotTo(HaveOccurred())
		Expect(seen).To(HaveLen(1), "one write of the MachineSet")
	})

	It("writes nothing when the reference moved since the decision", func() {
		Expect(capi.PointOwner(ctx, k8s, owner, "w-1a-0a1b2c3d", "w-1a-1111aaaa", nil)).To(Succeed())
		before := get(owner)
		err := capi.PointOwner(ctx, k8s, owner, "w-1a-0a1b2c3d", "w-1a-5e6f7a8b", map[string]string{"a/b": "c"})
		Expect(errors.Is(err, capi.ErrOwnerMoved)).To(BeTrue(), "%v", err)
		Expect(get(owner).GetResourceVersion()).To(Equal(before.GetResourceVersion()))
	})

	It("adds to annotations already there, escaping keys", func() {
		owner.SetAnnotations(map[string]string{"keep": "me"})
		Expect(k8s.Update(ctx, owner)).To(Succeed())
		Expect(capi.PointOwner(ctx, k8s, owner, "w-1a-0a1b2c3d", "w-1a-5e6f7a8b", map[string]string{"bootimage.openshift.io/x~y": "1"})).To(Succeed())
		Expect(get(owner).GetAnnotations()).To(Equal(map[string]string{"keep": "me", "bootimage.openshift.io/x~y": "1"}))
	})

	It("deletes a template only with the UID it was decided on", func() {
		decided := get(template)
		Expect(k8s.Delete(ctx, template)).To(Succeed())
		Eventually(func() error { return k8s.Create(ctx, object(original)) }).Should(Succeed())
		Expect(capi.DeleteTemplate(ctx, k8s, decided)).To(MatchError(ContainSubstring("Precondition failed")))
		Expect(get(template).GetUID()).NotTo(Equal(decided.GetUID()), "the recreated template stays")
	})
})
