package embeddedrbac_test

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// reasonClusterAPINotStarted is controllers.ReasonClusterAPINotStarted (internal to the operator).
const reasonClusterAPINotStarted = "ClusterAPIControllersNotStarted"

var _ = Describe("The operator inside the machine-config-controller, with Cluster API served and its gate on", func() {
	const oldTemplate = "w-1a-0a1b2c3d"
	var env *testenv.Env
	hooks := seams.Hooks{CRDPollInterval: 100 * time.Millisecond}
	opts := controllers.Options{Images: (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds()}
	owner := fixtures.ClusterAPIOwner("MachineSet", "w-1a", oldTemplate)
	capiTemplate := func() string {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(owner.GroupVersionKind())
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(owner), got)).To(Succeed())
		name, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "infrastructureRef", "name")
		return name
	}
	machineAPIImage := func() string {
		ms := &machinev1beta1.MachineSet{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "worker-a"}, ms)).To(Succeed())
		var ps map[string]any
		Expect(json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
		return ps["ami"].(map[string]any)["id"].(string)
	}
	clusterAPIRole := func(o client.Object) bool { return o.GetNamespace() == testenv.CAPINamespace }

	BeforeEach(func() {
		env = testenv.StartForSpecs(testenv.Options{CAPI: true})
		managers := &operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{
			fixtures.MachineManager(operatorv1.MachineSets, operatorv1.All, nil),
			fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All),
		}}
		Expect(fixtures.Create(ctx, env.Client,
			fixtures.Infrastructure(configv1.AWSPlatformType),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesAWSCAPI}, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			fixtures.MachineConfiguration(managers),
			fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
			fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
			fixtures.AWSMachineTemplate(oldTemplate, fixtures.OldAWSAMI),
			owner.DeepCopy(),
		)).To(Succeed())
		grantMCC(env.Client)
	})

	It("keeps running without the Cluster API rules, names them, and starts the Cluster API controllers once they are granted", func() {
		grantEmbeddedIf(env.Client, func(o client.Object) bool { return !clusterAPIRole(o) })
		mgr := asMCCWith(env, hooks, opts)

		Eventually(machineAPIImage).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Eventually(eventsOf(env.Client, reasonClusterAPINotStarted)).Should(ContainElement(And(
			HavePrefix("MachineConfiguration/cluster: "),
			ContainSubstring("{apiGroups: [cluster.x-k8s.io], resources: [machinesets], verbs: [list]}"),
			ContainSubstring("{apiGroups: [cluster.x-k8s.io], resources: [machinedeployments], verbs: [watch]}"))))
		Expect(capiTemplate()).To(Equal(oldTemplate))

		By("granting the Cluster API rules of the embedded RBAC, without a restart")
		grantEmbeddedIf(env.Client, clusterAPIRole)
		Eventually(capiTemplate).ShouldNot(Equal(oldTemplate))
		exited, err := mgr.Exited()
		Expect(err).NotTo(HaveOccurred())
		Expect(exited).To(BeFalse(), "the manager runs on")
	})

	It("stops the Cluster API controllers when their rules are revoked after start, says so, and resumes once they are restored", func() {
		grantEmbedded(env.Client, func(client.Object) {})
		mgr := asMCCWith(env, hooks, opts)
		Eventually(capiTemplate).ShouldNot(Equal(oldTemplate))

		By("revoking the Cluster API Role's rules while running")
		role := &rbacv1.Role{}
		for _, o := range embeddedObjects() {
			if r, ok := o.(*rbacv1.Role); ok && clusterAPIRole(r) {
				role = r
			}
		}
		Expect(role.Name).NotTo(BeEmpty())
		granted := role.Rules
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(role), role)).To(Succeed())
		role.Rules = nil
		Expect(env.Client.Update(ctx, role)).To(Succeed())
		Eventually(eventsOf(env.Client, reasonClusterAPINotStarted)).Should(ContainElement(
			ContainSubstring("{apiGroups: [cluster.x-k8s.io], resources: [machinesets], verbs: [list]}")))
		statusFollows(env.Client)

		By("restoring them: a new Cluster API MachineSet is updated")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(role), role)).To(Succeed())
		role.Rules = granted
		Expect(env.Client.Update(ctx, role)).To(Succeed())
		second := fixtures.ClusterAPIOwner("MachineSet", "w-1b", "w-1b-0")
		Expect(fixtures.Create(ctx, env.Client, fixtures.AWSMachineTemplate("w-1b-0", fixtures.OldAWSAMI), second)).To(Succeed())
		Eventually(func() string {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(second.GroupVersionKind())
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(second), got)).To(Succeed())
			name, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "infrastructureRef", "name")
			return name
		}).ShouldNot(Equal("w-1b-0"))
		statusFollows(env.Client)
		exited, err := mgr.Exited()
		Expect(err).NotTo(HaveOccurred())
		Expect(exited).To(BeFalse(), "the manager runs on")
	})

	It("updates a Cluster API MachineSet under the documented embedded RBAC", func() {
		grantEmbedded(env.Client, func(client.Object) {})
		mgr := asMCCWith(env, hooks, opts)
		Eventually(capiTemplate).ShouldNot(Equal(oldTemplate))
		Eventually(machineAPIImage).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Expect(eventsOf(env.Client, reasonClusterAPINotStarted)()).To(BeEmpty())
		exited, err := mgr.Exited()
		Expect(err).NotTo(HaveOccurred())
		Expect(exited).To(BeFalse())
	})

	It("starts on an AWS cluster with a Cluster API Role that grants the AWS infrastructure kinds only", func() {
		grantEmbedded(env.Client, func(o client.Object) {
			if role, ok := o.(*rbacv1.Role); ok && clusterAPIRole(role) {
				for i := range role.Rules {
					role.Rules[i].Resources = slices.DeleteFunc(role.Rules[i].Resources, func(r string) bool {
						return strings.HasPrefix(r, "azure") || strings.HasPrefix(r, "gcp") || strings.HasPrefix(r, "vsphere")
					})
				}
			}
		})
		mgr := asMCCWith(env, hooks, opts)
		Eventually(capiTemplate).ShouldNot(Equal(oldTemplate))
		Expect(eventsOf(env.Client, reasonClusterAPINotStarted)()).To(BeEmpty(), "no other platform's kinds are asked for")
		exited, err := mgr.Exited()
		Expect(err).NotTo(HaveOccurred())
		Expect(exited).To(BeFalse())
	})

	It("names the one rule missing from the Cluster API Role", func() {
		grantEmbedded(env.Client, func(o client.Object) {
			if role, ok := o.(*rbacv1.Role); ok && clusterAPIRole(role) {
				for i := range role.Rules {
					if slices.Contains(role.Rules[i].Resources, "machinedeployments") {
						role.Rules[i].Resources = []string{"machinesets"}
						role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machinedeployments"}, Verbs: []string{"get", "list", "patch"}})
						break
					}
				}
			}
		})
		mgr := asMCCWith(env, hooks, opts)
		Eventually(eventsOf(env.Client, reasonClusterAPINotStarted)).Should(ContainElement(And(
			ContainSubstring("lack the rules {apiGroups: [cluster.x-k8s.io], resources: [machinedeployments], verbs: [watch]} in namespace "+testenv.CAPINamespace),
			Not(ContainSubstring("machinesets")))))
		Eventually(machineAPIImage).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Expect(capiTemplate()).To(Equal(oldTemplate))
		exited, err := mgr.Exited()
		Expect(err).NotTo(HaveOccurred())
		Expect(exited).To(BeFalse())
	})
})

// statusFollows changes MachineConfiguration/cluster's spec (its log level, which nothing here
// reads) and waits for the operator to write the status of that generation.
func statusFollows(c client.Client) {
	GinkgoHelper()
	mc := &operatorv1.MachineConfiguration{}
	Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
	level := operatorv1.Debug
	if mc.Spec.LogLevel == operatorv1.Debug {
		level = operatorv1.Normal
	}
	Expect(c.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"logLevel":"`+string(level)+`"}}`)))).To(Succeed())
	Eventually(func() int64 {
		got := &operatorv1.MachineConfiguration{}
		Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, got)).To(Succeed())
		return got.Status.ObservedGeneration
	}).Should(Equal(mc.Generation), "status written for the new generation")
}
