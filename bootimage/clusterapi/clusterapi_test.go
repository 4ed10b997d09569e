package clusterapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

func fromJSON(s string) *unstructured.Unstructured {
	GinkgoHelper()
	u := &unstructured.Unstructured{}
	Expect(u.UnmarshalJSON([]byte(s))).To(Succeed())
	return u
}

// capiOwner is a Cluster API MachineSet or MachineDeployment of cluster demo-x7k2p, with the
// non-controller owner reference to its Cluster every OpenShift one has.
func capiOwner(kind, template string) *unstructured.Unstructured {
	return fromJSON(fmt.Sprintf(`{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": %q,
		"metadata": {"name": "worker-a", "namespace": "openshift-cluster-api", "resourceVersion": "7",
			"ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "demo-x7k2p", "uid": "u1", "blockOwnerDeletion": true}]},
		"spec": {"clusterName": "demo-x7k2p", "replicas": 2, "template": {"metadata": {"labels": {"node-role": "worker"}},
			"spec": {"clusterName": "demo-x7k2p", "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": %q, "name": "worker-a-1a2b3c4d"}}}}}`,
		kind, strings.SplitN(template, "|", 2)[0]))
}

// capiTemplate is an infrastructure machine template named worker-a-1a2b3c4d whose
// spec.template.spec is machineSpec, labelled and owned as cluster-capi-operator makes them, with
// a field no Go type of this module knows.
func capiTemplate(kind, machineSpec string) *unstructured.Unstructured {
	return fromJSON(fmt.Sprintf(`{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": %q,
		"metadata": {"name": "worker-a-1a2b3c4d", "namespace": "openshift-cluster-api", "uid": "t1", "resourceVersion": "5",
			"creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1,
			"labels": {"machine.openshift.io/cluster-api-machineset": "worker-a", "cluster.x-k8s.io/cluster-name": "demo-x7k2p"},
			"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
			"ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "demo-x7k2p", "uid": "u1", "blockOwnerDeletion": true}]},
		"spec": {"template": {"metadata": {}, "spec": %s}, "futureField": {"nested": [1, 2]}}}`, kind, machineSpec))
}

const (
	awsTemplateSpec   = `{"ami": {"id": "` + fixtures.OldAWSAMI + `"}, "instanceType": "m6i.xlarge", "rootVolume": {"size": 120}, "additionalSecurityGroups": [{"id": "sg-1"}], "unknownToCAPA": true}`
	gcpTemplateSpec   = `{"image": "` + fixtures.OldGCPImage + `", "instanceType": "n2-standard-4"}`
	azureTemplateSpec = `{"image": {"marketplace": {"publisher": "azureopenshift", "offer": "aro4", "sku": "aro_416_v2", "version": "416.94.20240701", "thirdPartyImage": false}}, "vmSize": "Standard_D4s_v3"}`
)

func capiCluster(platform configv1.PlatformType) bootimage.Cluster {
	c := fixtures.DecisionCluster(platform)
	c.Gates = gateSet{featuregates.ManagedBootImagesAWSCAPI: true}
	c.Infrastructure = awsInfrastructure("us-east-1")
	c.Effective.MachineManagers = append(c.Effective.MachineManagers,
		operatorv1.MachineManager{Resource: operatorv1.MachineSets, APIGroup: bootimage.ClusterAPIGroup, Selection: operatorv1.MachineManagerSelector{Mode: operatorv1.All}},
		operatorv1.MachineManager{Resource: bootimage.MachineDeployments, APIGroup: bootimage.ClusterAPIGroup, Selection: operatorv1.MachineManagerSelector{Mode: operatorv1.All}})
	return c
}

var templateKinds = map[configv1.PlatformType]string{configv1.AWSPlatformType: "AWSMachineTemplate", configv1.GCPPlatformType: "GCPMachineTemplate", configv1.AzurePlatformType: "AzureMachineTemplate", configv1.VSpherePlatformType: "VSphereMachineTemplate"}

func decideCAPI(platform configv1.PlatformType, kind, machineSpec string, mutations ...fixtures.Mutation) bootimage.Decision {
	GinkgoHelper()
	tk := templateKinds[platform]
	c, o := capiCluster(platform), clusterapi.ObjectOf(capiOwner(kind, tk), capiTemplate(tk, machineSpec), nil)
	for _, m := range mutations {
		m(&c, &o)
	}
	d, err := bootimage.Decide(ctx, c, o)
	Expect(err).NotTo(HaveOccurred())
	return d
}

func authorityPtr(a machinev1beta1.MachineAuthority) *machinev1beta1.MachineAuthority { return &a }

var _ = Describe("Who is in charge", func() {
	DescribeTable("a Cluster API MachineSet, by its Machine API twin",
		func(twin *machinev1beta1.MachineAuthority, action bootimage.Action, reason, message string) {
			d := decideCAPI(configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, func(_ *bootimage.Cluster, o *bootimage.Object) { o.Twin = twin })
			Expect(d).To(And(HaveField("Action", action), HaveField("Reason", reason), HaveField("Message", ContainSubstring(message))))
			Expect(d.LeftBehind()).To(BeFalse())
		},
		Entry("no twin: ours", nil, bootimage.Update, bootimage.ReasonImageOutdated, "is outdated"),
		Entry("twin ClusterAPI: ours", authorityPtr(machinev1beta1.MachineAuthorityClusterAPI), bootimage.Update, bootimage.ReasonImageOutdated, "is outdated"),
		Entry("twin MachineAPI", authorityPtr(machinev1beta1.MachineAuthorityMachineAPI), bootimage.Skip, bootimage.ReasonAuthorityMachineAPI, "openshift-machine-api/worker-a is authoritative"),
		Entry("twin without authority yet", authorityPtr(""), bootimage.Skip, bootimage.ReasonAuthorityMachineAPI, "is authoritative"),
		Entry("twin Migrating", authorityPtr(machinev1beta1.MachineAuthorityMigrating), bootimage.Skip, bootimage.ReasonMigrating, "migrating"),
	)
})

var _ = Describe("Cluster API objects", func() {
	none := fixtures.Mutation(func(*bootimage.Cluster, *bootimage.Object) {})
	DescribeTable("skip and error reasons",
		func(platform configv1.PlatformType, kind, machineSpec string, m fixtures.Mutation, action bootimage.Action, reason, message string) {
			d := decideCAPI(platform, kind, machineSpec, m)
			Expect(d).To(And(HaveField("Action", action), HaveField("Reason", reason), HaveField("Message", ContainSubstring(message))))
			Expect(d.ProviderSpecPatch).To(BeNil())
		},
		Entry("gate off", configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, fixtures.Mutation(func(c *bootimage.Cluster, _ *bootimage.Object) { c.Gates = gateSet{} }),
			bootimage.Skip, bootimage.ReasonFeatureGateDisabled, "ManagedBootImagesAWSCAPI is off"),
		Entry("no cluster.x-k8s.io entry", configv1.AWSPlatformType, "MachineDeployment", awsTemplateSpec, fixtures.Mutation(func(c *bootimage.Cluster, _ *bootimage.Object) {
			c.Effective = fixtures.DecisionCluster(configv1.AWSPlatformType).Effective
		}), bootimage.Skip, bootimage.ReasonNotSelected, "machinedeployments.cluster.x-k8s.io"),
		Entry("vSphere has no template kind", configv1.VSpherePlatformType, "MachineSet", awsTemplateSpec, none, bootimage.Skip, bootimage.ReasonUnsupportedPlatform, "not managed on platform \"VSphere\""),
		Entry("a MachineSet of a MachineDeployment", configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, fixtures.Mutation(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.OwnerReferences = append(o.OwnerReferences, metav1.OwnerReference{Kind: "MachineDeployment", Name: "workers", Controller: ptr(true)})
		}), bootimage.Skip, bootimage.ReasonOwnedByMachineDeployment, "owned by MachineDeployment workers"),
		Entry("another controller", configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, fixtures.Mutation(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.OwnerReferences = append(o.OwnerReferences, metav1.OwnerReference{Kind: "MachinePool", Name: "hive", Controller: ptr(true)})
		}), bootimage.Skip, bootimage.ReasonOwnedByController, "owned by MachinePool hive"),
		Entry("a ClusterClass topology", configv1.AWSPlatformType, "MachineDeployment", awsTemplateSpec, fixtures.Mutation(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Labels = map[string]string{bootimage.TopologyOwnedLabel: ""}
		}), bootimage.Skip, bootimage.ReasonManagedByTopology, "ClusterClass"),
		Entry("Windows", configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, fixtures.Mutation(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.TemplateLabels = map[string]string{bootimage.WindowsLabel: "Windows"}
		}), bootimage.Skip, bootimage.ReasonWindowsMachineSet, "Windows"),
		Entry("another OS stream", configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, fixtures.Mutation(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Labels = map[string]string{bootimage.OSStreamLabel: "rhel-10"}
		}), bootimage.Skip, bootimage.ReasonOSStreamNotInBootImages, "names OS stream rhel-10, but coreos-bootimages has no streams key"),
		Entry("a template kind of another platform", configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, fixtures.Mutation(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.TemplateKind = "OpenStackMachineTemplate"
		}), bootimage.Skip, bootimage.ReasonUnsupportedTemplate, "OpenStackMachineTemplate is not managed on AWS"),
		Entry("multi-arch without the annotation: an error, as the MCO", configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, fixtures.Mutation(func(c *bootimage.Cluster, _ *bootimage.Object) { c.MultiArch = true }),
			bootimage.Error, bootimage.ReasonArchitectureUnknown, "multi-architecture cluster"),
		Entry("AWS: AMI looked up by name", configv1.AWSPlatformType, "MachineSet", `{"imageLookupOrg": "123", "ami": {}}`, none, bootimage.Skip, bootimage.ReasonImageNotByID, "looked up by name"),
		Entry("AWS: custom AMI", configv1.AWSPlatformType, "MachineSet", `{"ami": {"id": "`+fixtures.CustomAMI+`"}}`, none, bootimage.Skip, bootimage.ReasonCustomImage, "owned by account"),
		Entry("AWS: region unknown", configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, fixtures.Mutation(func(c *bootimage.Cluster, _ *bootimage.Object) { c.Infrastructure = awsInfrastructure("") }),
			bootimage.Error, bootimage.ReasonInvalidProviderSpec, "status.platformStatus.aws.region is empty"),
		Entry("GCP: imageFamily", configv1.GCPPlatformType, "MachineSet", `{"imageFamily": "projects/rhcos-cloud/global/images/family/rhcos-9"}`, none, bootimage.Skip, bootimage.ReasonImageNotByID, "imageFamily"),
		Entry("GCP: marketplace image", configv1.GCPPlatformType, "MachineSet", `{"image": "projects/redhat-marketplace-public/global/images/rhcos-x"}`, none, bootimage.Skip, bootimage.ReasonCustomImage, "not an RHCOS image"),
		Entry("Azure: image by id", configv1.AzurePlatformType, "MachineSet", `{"image": {"id": "/subscriptions/s/images/golden"}}`, none, bootimage.Skip, bootimage.ReasonCustomImage, "id, computeGallery or sharedGallery"),
		Entry("Azure: compute gallery", configv1.AzurePlatformType, "MachineSet", `{"image": {"computeGallery": {"name": "g", "gallery": "x", "version": "1"}}}`, none, bootimage.Skip, bootimage.ReasonCustomImage, "computeGallery"),
		Entry("Azure: confidential VM", configv1.AzurePlatformType, "MachineSet", `{"image": {"marketplace": {"publisher": "azureopenshift", "offer": "aro4", "sku": "aro_416_v2", "version": "416.94.20240701"}}, "securityProfile": {"securityType": "ConfidentialVM"}}`, none,
			bootimage.Skip, bootimage.ReasonConfidentialVM, "securityProfile.securityType is ConfidentialVM"),
		Entry("the template is missing", configv1.AWSPlatformType, "MachineSet", awsTemplateSpec, fixtures.Mutation(func(_ *bootimage.Cluster, o *bootimage.Object) {
			*o = clusterapi.ObjectOf(capiOwner("MachineSet", "AWSMachineTemplate"), nil, nil)
		}), bootimage.Error, bootimage.ReasonInvalidTemplate, "AWSMachineTemplate openshift-cluster-api/worker-a-1a2b3c4d not found"),
	)

	DescribeTable("update only the boot image field, as the Machine API path chooses it",
		func(platform configv1.PlatformType, machineSpec string, m fixtures.Mutation, current, target string, field []string, want any) {
			d := decideCAPI(platform, "MachineSet", machineSpec, m)
			Expect(d).To(And(HaveField("Action", bootimage.Update), HaveField("APIGroup", "cluster.x-k8s.io"), HaveField("Current", current), HaveField("Target", target)), d.Message)
			tk := templateKinds[platform]
			old := capiTemplate(tk, machineSpec)
			copied, err := clusterapi.TemplateCopy(old, d)
			Expect(err).NotTo(HaveOccurred())
			got, found, err := unstructured.NestedFieldNoCopy(copied.Object, append([]string{"spec", "template", "spec"}, field...)...)
			Expect(err).NotTo(HaveOccurred())
			Expect(found).To(BeTrue())
			Expect(got).To(Equal(want))
			Expect(unstructured.SetNestedField(copied.Object, mustNested(old, field), append([]string{"spec", "template", "spec"}, field...)...)).To(Succeed())
			Expect(copied.Object["spec"]).To(Equal(old.Object["spec"]), "nothing but the boot image changed, unknown fields kept")
		},
		Entry("AWS: the region is the cluster's", configv1.AWSPlatformType, awsTemplateSpec, fixtures.Mutation(func(*bootimage.Cluster, *bootimage.Object) {}), fixtures.OldAWSAMI, fixtures.NewAWSAMIUSEast1,
			[]string{"ami", "id"}, fixtures.NewAWSAMIUSEast1),
		Entry("AWS arm64 from the annotation", configv1.AWSPlatformType, awsTemplateSpec, fixtures.Mutation(func(_ *bootimage.Cluster, o *bootimage.Object) {
			o.Annotations = map[string]string{bootimage.ArchAnnotation: "kubernetes.io/arch=arm64"}
		}), fixtures.OldAWSAMI, fixtures.NewAWSAMIARM64, []string{"ami", "id"}, fixtures.NewAWSAMIARM64),
		Entry("AWS Marketplace", configv1.AWSPlatformType, `{"ami": {"id": "`+fixtures.OldMarketplaceAMI+`"}}`, fixtures.Mutation(func(*bootimage.Cluster, *bootimage.Object) {}), fixtures.OldMarketplaceAMI, fixtures.NewMarketplaceAMI,
			[]string{"ami", "id"}, fixtures.NewMarketplaceAMI),
		Entry("GCP", configv1.GCPPlatformType, gcpTemplateSpec, fixtures.Mutation(func(*bootimage.Cluster, *bootimage.Object) {}), fixtures.OldGCPImage, fixtures.NewGCPImage, []string{"image"}, fixtures.NewGCPImage),
		Entry("Azure no-purchase-plan Gen2", configv1.AzurePlatformType, azureTemplateSpec, fixtures.Mutation(func(*bootimage.Cluster, *bootimage.Object) {}),
			"azureopenshift:aro4:aro_416_v2:416.94.20240701", "azureopenshift:aro4:aro_420_v2:420.96.20250523",
			[]string{"image", "marketplace"}, map[string]any{"publisher": "azureopenshift", "offer": "aro4", "sku": "aro_420_v2", "version": "420.96.20250523", "thirdPartyImage": false}),
		Entry("Azure paid OCP keeps its plan", configv1.AzurePlatformType, `{"image": {"marketplace": {"publisher": "redhat", "offer": "rh-ocp-worker", "sku": "rh-ocp-worker_v2", "version": "4.16.2024", "thirdPartyImage": true}}}`, fixtures.Mutation(func(*bootimage.Cluster, *bootimage.Object) {}),
			"redhat:rh-ocp-worker:rh-ocp-worker_v2:4.16.2024", "redhat:rh-ocp-worker:rh-ocp-worker_v2:420.96.20250523",
			[]string{"image", "marketplace"}, map[string]any{"publisher": "redhat", "offer": "rh-ocp-worker", "sku": "rh-ocp-worker_v2", "version": "420.96.20250523", "thirdPartyImage": true}),
	)

	It("is NoChange on the stream's image", func() {
		d := decideCAPI(configv1.AWSPlatformType, "MachineSet", `{"ami": {"id": "`+fixtures.NewAWSAMIUSEast1+`"}}`)
		Expect(d).To(And(HaveField("Action", bootimage.NoChange), HaveField("Reason", bootimage.ReasonUpToDate)))
	})

	DescribeTable("the image an object keeps, read before any decision",
		func(platform configv1.PlatformType, machineSpec, want string) {
			tk := templateKinds[platform]
			o := clusterapi.ObjectOf(capiOwner("MachineSet", tk), capiTemplate(tk, machineSpec), nil)
			Expect(bootimage.CurrentImage(platform, o)).To(Equal(want))
		},
		Entry(nil, configv1.AWSPlatformType, awsTemplateSpec, fixtures.OldAWSAMI),
		Entry(nil, configv1.GCPPlatformType, gcpTemplateSpec, fixtures.OldGCPImage),
		Entry(nil, configv1.AzurePlatformType, azureTemplateSpec, "azureopenshift:aro4:aro_416_v2:416.94.20240701"),
		Entry(nil, configv1.AzurePlatformType, `{"image": {"id": "/subscriptions/s/images/golden"}}`, "/subscriptions/s/images/golden"),
	)

	It("says how many machines a MachineDeployment update replaces", func() {
		d := decideCAPI(configv1.AWSPlatformType, "MachineDeployment", awsTemplateSpec, func(_ *bootimage.Cluster, o *bootimage.Object) { o.Machines, o.RollingOut = 7, false })
		Expect(d.Action).To(Equal(bootimage.Update))
		Expect(d.Rolls).To(HaveValue(Equal(7)))
		Expect(d.Message).To(HaveSuffix("; rolls 7 machines: a MachineDeployment replaces every Machine it owns when its template changes"))
		out, err := json.Marshal(d)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring(`"rolls":7`))

		ms := decideCAPI(configv1.AWSPlatformType, "MachineSet", awsTemplateSpec)
		Expect(ms.Rolls).To(BeNil(), "a MachineSet rolls nothing: new machines only")
	})

	It("waits for a MachineDeployment's rollout to end before starting another", func() {
		d := decideCAPI(configv1.AWSPlatformType, "MachineDeployment", awsTemplateSpec, func(_ *bootimage.Cluster, o *bootimage.Object) { o.Machines, o.RollingOut = 7, true })
		Expect(d).To(And(HaveField("Action", bootimage.Skip), HaveField("Reason", bootimage.ReasonMachineDeploymentRollingOut), HaveField("ProviderSpecPatch", BeNil())))
		Expect(d.Target).To(Equal(fixtures.NewAWSAMIUSEast1), "what it waits to roll out")
		Expect(d.LeftBehind()).To(BeFalse(), "a rollout under way is not an image left behind")
	})

	DescribeTable("a MachineDeployment rolls out",
		func(status map[string]any, want bool) {
			md := capiOwner("MachineDeployment", "AWSMachineTemplate")
			md.SetGeneration(3)
			if status != nil {
				md.Object["status"] = status
			}
			Expect(clusterapi.RollingOut(md)).To(Equal(want))
		},
		Entry("no status yet: its controller has not seen it", nil, true),
		Entry("an older generation observed", map[string]any{"observedGeneration": int64(2)}, true),
		Entry("condition RollingOut True", map[string]any{"observedGeneration": int64(3), "conditions": []any{map[string]any{"type": "RollingOut", "status": "True"}}}, true),
		Entry("settled", map[string]any{"observedGeneration": int64(3), "conditions": []any{map[string]any{"type": "RollingOut", "status": "False"}}}, false),
	)
})

func mustNested(u *unstructured.Unstructured, field []string) any {
	GinkgoHelper()
	v, found, err := unstructured.NestedFieldCopy(u.Object, append([]string{"spec", "template", "spec"}, field...)...)
	Expect(err).NotTo(HaveOccurred())
	Expect(found).To(BeTrue())
	return v
}

func ptr[T any](v T) *T { return &v }

var _ = Describe("Template copies", func() {
	var old *unstructured.Unstructured
	var d bootimage.Decision
	BeforeEach(func() {
		old = capiTemplate("AWSMachineTemplate", awsTemplateSpec)
		d = decideCAPI(configv1.AWSPlatformType, "MachineSet", awsTemplateSpec)
		Expect(d.Action).To(Equal(bootimage.Update))
	})

	It("keeps what a new object needs, marks it ours, drops cluster-capi-operator's label and blockOwnerDeletion", func() {
		copied, err := clusterapi.TemplateCopy(old, d)
		Expect(err).NotTo(HaveOccurred())
		Expect(copied.GetAPIVersion()).To(Equal(old.GetAPIVersion()))
		Expect(copied.GetKind()).To(Equal("AWSMachineTemplate"))
		Expect(copied.GetNamespace()).To(Equal("openshift-cluster-api"))
		Expect(copied.GetName()).To(MatchRegexp(`^worker-a-[0-9a-f]{10}$`))
		Expect(copied.GetLabels()).To(Equal(map[string]string{"cluster.x-k8s.io/cluster-name": "demo-x7k2p", clusterapi.TemplateCopyLabel: "true",
			clusterapi.TemplateOwnerLabel: clusterapi.TemplateCopyLabels("MachineSet", "worker-a")[clusterapi.TemplateOwnerLabel]}))
		Expect(copied.GetAnnotations()).To(Equal(map[string]string{clusterapi.TemplateOwnerAnnotation: "MachineSet/worker-a", clusterapi.CopiedFromAnnotation: "worker-a-1a2b3c4d"}))
		Expect(copied.GetOwnerReferences()).To(Equal([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "demo-x7k2p", UID: "u1"}}))
		Expect(copied.GetResourceVersion()).To(BeEmpty())
		Expect(copied.GetUID()).To(BeEmpty())
		created := copied.GetCreationTimestamp()
		Expect(created.IsZero()).To(BeTrue())
		Expect(old.GetLabels()).To(HaveKey(clusterapi.CAPIOperatorTemplateLabel), "the template read is left as it was")
	})

	It("names copies by owner and spec, never as cluster-capi-operator does, and recognises its own", func() {
		a, err := clusterapi.TemplateCopy(old, d)
		Expect(err).NotTo(HaveOccurred())
		b, err := clusterapi.TemplateCopy(old.DeepCopy(), d)
		Expect(err).NotTo(HaveOccurred())
		Expect(b.GetName()).To(Equal(a.GetName()), "a copy left by a crash is found again")
		Expect(clusterapi.SameTemplateCopy(b, a.GetKind(), d)).To(BeTrue())
		defaulted := b.DeepCopy()
		Expect(unstructured.SetNestedField(defaulted.Object, "Open", "spec", "template", "spec", "defaultedByTheServer")).To(Succeed())
		Expect(clusterapi.SameTemplateCopy(defaulted, a.GetKind(), d)).To(BeTrue(), "a field the server defaulted is not ours to compare")
		Expect(clusterapi.SameTemplateCopy(b, "GCPMachineTemplate", d)).To(BeFalse(), "another kind")
		stranger := b.DeepCopy()
		stranger.SetAnnotations(map[string]string{clusterapi.TemplateOwnerAnnotation: "MachineSet/worker-b"})
		Expect(clusterapi.SameTemplateCopy(stranger, a.GetKind(), d)).To(BeFalse(), "made for another owner")

		md := d
		md.Kind = "MachineDeployment"
		c, err := clusterapi.TemplateCopy(old, md)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.GetName()).NotTo(Equal(a.GetName()))

		other := d
		other.ProviderSpecPatch = []bootimage.PatchOp{{Op: "add", Path: "/ami/id", Value: "ami-0000000000000000a"}}
		e, err := clusterapi.TemplateCopy(old, other)
		Expect(err).NotTo(HaveOccurred())
		Expect(e.GetName()).NotTo(Equal(a.GetName()))
		Expect(clusterapi.SameTemplateCopy(e, a.GetKind(), d)).To(BeFalse(), "same name, another image: a clash")
		Expect(clusterapi.SameTemplateCopy(old, a.GetKind(), d)).To(BeFalse(), "not ours")
	})

	It("shortens a long owner name to fit", func() {
		name, err := clusterapi.TemplateCopyName("MachineSet", strings.Repeat("a", 253), old)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(name)).To(BeNumerically("<=", 253))
	})

	It("refuses a decision that is not an update", func() {
		d.Action, d.ProviderSpecPatch = bootimage.NoChange, nil
		_, err := clusterapi.TemplateCopy(old, d)
		Expect(err).To(MatchError(ContainSubstring("no update")))
	})

	It("patches the owner only while it still names the old template", func() {
		patch, err := clusterapi.InfrastructureRefPatch("7", "worker-a-1a2b3c4d", "worker-a-0123456789", bootimage.PatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{"k": "v"}})
		Expect(err).NotTo(HaveOccurred())
		p, err := jsonpatch.DecodePatch(patch)
		Expect(err).NotTo(HaveOccurred())
		owner, err := capiOwner("MachineSet", "AWSMachineTemplate").MarshalJSON()
		Expect(err).NotTo(HaveOccurred())
		out, err := p.Apply(owner)
		Expect(err).NotTo(HaveOccurred())
		patched := fromJSON(string(out))
		ref, err := clusterapi.InfrastructureRef(patched)
		Expect(err).NotTo(HaveOccurred())
		Expect(ref).To(Equal(clusterapi.TemplateRef{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "AWSMachineTemplate", Name: "worker-a-0123456789"}))
		Expect(patched.GetAnnotations()).To(HaveKeyWithValue("k", "v"))

		moved := capiOwner("MachineSet", "AWSMachineTemplate")
		Expect(unstructured.SetNestedField(moved.Object, "someone-elses", "spec", "template", "spec", "infrastructureRef", "name")).To(Succeed())
		raw, err := moved.MarshalJSON()
		Expect(err).NotTo(HaveOccurred())
		_, err = p.Apply(raw)
		Expect(err).To(HaveOccurred(), "the precondition fails")
	})

	It("selects an owner's copies by a label that fits a label value, and tells owners apart", func() {
		long := strings.Repeat("w", 253)
		labels := clusterapi.TemplateCopyLabels("MachineSet", long)
		Expect(metavalidation.ValidateLabels(labels, field.NewPath("labels"))).To(BeEmpty())
		Expect(labels[clusterapi.TemplateOwnerLabel]).NotTo(Equal(clusterapi.TemplateCopyLabels("MachineDeployment", long)[clusterapi.TemplateOwnerLabel]))
		Expect(labels[clusterapi.TemplateOwnerLabel]).NotTo(Equal(clusterapi.TemplateCopyLabels("MachineSet", long+"x")[clusterapi.TemplateOwnerLabel]))
	})

	It("takes as an owner's copies only those its annotation names, but the one in use", func() {
		copyOf := func(name, owner string) unstructured.Unstructured {
			t := unstructured.Unstructured{}
			t.SetName(name)
			t.SetAnnotations(map[string]string{clusterapi.TemplateOwnerAnnotation: owner})
			return t
		}
		all := []unstructured.Unstructured{copyOf("a-1", "MachineSet/a"), copyOf("a-2", "MachineSet/a"), copyOf("a-3", "MachineDeployment/a"), copyOf("b-1", "MachineSet/b")}
		var names []string
		for _, t := range clusterapi.TemplateCopiesOf(all, "MachineSet", "a", "a-2") {
			names = append(names, t.GetName())
		}
		Expect(names).To(Equal([]string{"a-1"}))
	})

	DescribeTable("which old templates may be deleted",
		func(labels map[string]string, age time.Duration, use clusterapi.TemplateUse, deletable bool) {
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			t := unstructured.Unstructured{}
			t.SetKind("AWSMachineTemplate")
			t.SetName("worker-a-0123456789")
			t.SetLabels(labels)
			t.SetCreationTimestamp(metav1.NewTime(now.Add(-age)))
			keep := unstructured.Unstructured{}
			keep.SetName("unrelated")
			got := clusterapi.DeletableTemplates([]unstructured.Unstructured{t, keep}, use, now.Add(-clusterapi.TemplateGCGrace))
			if deletable {
				Expect(got).To(Equal([]string{"worker-a-0123456789"}))
			} else {
				Expect(got).To(BeEmpty())
			}
		},
		Entry("our copy, unused", map[string]string{clusterapi.TemplateCopyLabel: "true"}, time.Hour, clusterapi.TemplateUse{}, true),
		Entry("our copy, just made: its owner patch may be under way", map[string]string{clusterapi.TemplateCopyLabel: "true"}, time.Minute, clusterapi.TemplateUse{}, false),
		Entry("referenced by a MachineSet or MachineDeployment", map[string]string{clusterapi.TemplateCopyLabel: "true"}, time.Hour,
			clusterapi.TemplateUse{Owners: []clusterapi.TemplateRef{{Kind: "AWSMachineTemplate", Name: "worker-a-0123456789"}}}, false),
		Entry("a Machine or AWSMachine was cloned from it", map[string]string{clusterapi.TemplateCopyLabel: "true"}, time.Hour,
			clusterapi.TemplateUse{ClonedFrom: []map[string]string{{clusterapi.ClonedFromNameAnnotation: "worker-a-0123456789"}}}, false),
		Entry("not ours", map[string]string{"cluster.x-k8s.io/cluster-name": "demo"}, time.Hour, clusterapi.TemplateUse{}, false),
		Entry("cluster-capi-operator's, whatever else it says", map[string]string{clusterapi.TemplateCopyLabel: "true", clusterapi.CAPIOperatorTemplateLabel: "worker-a"}, time.Hour, clusterapi.TemplateUse{}, false),
	)
})

// awsInfrastructure is an AWS Infrastructure/cluster in region.
func awsInfrastructure(region string) *configv1.Infrastructure {
	return &configv1.Infrastructure{Status: configv1.InfrastructureStatus{PlatformStatus: &configv1.PlatformStatus{Type: configv1.AWSPlatformType, AWS: &configv1.AWSPlatformStatus{Region: region}}}}
}
