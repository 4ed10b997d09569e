// Package optionalkinds_test runs the operator while the CRDs of the kinds it can work without
// come and go (issue 45): MachineConfigPool, OSImageStream, the Machine API and Cluster API. In
// each, the process keeps running, MachineConfiguration status keeps following its spec, what is
// missing is said, and the kind is picked up again when it comes back.
package optionalkinds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

var ctx = context.Background()

func TestOptionalKinds(t *testing.T) {
	testenv.RunSpecs(t, "kinds the operator can work without, served or not, coming and going", testenv.Waits{Timeout: 60 * time.Second, Polling: 100 * time.Millisecond})
}

// hooks poll for CRDs often; a controller whose caches cannot sync gives up after the timeout
// the manager options give it (controllers.ManagerOptions keeps controller-runtime's default).
var hooks = seams.Hooks{CRDPollInterval: 100 * time.Millisecond}

func images() controllers.Options {
	return controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds()}
}

// operator starts the operator on env; the spec fails if it ever exits.
func operator(env *testenv.Env) *testenv.Manager {
	GinkgoHelper()
	mgr, err := env.StartOperatorWithHooks(hooks, images())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		exited, err := mgr.Exited()
		Expect(err).NotTo(HaveOccurred())
		Expect(exited).To(BeFalse(), "the operator exited")
		Expect(mgr.Stop()).To(Succeed())
	})
	return mgr
}

// alive asserts the operator runs and its status follows a spec change.
func alive(env *testenv.Env, mgr *testenv.Manager) {
	GinkgoHelper()
	exited, err := mgr.Exited()
	Expect(err).NotTo(HaveOccurred())
	Expect(exited).To(BeFalse(), "the operator exited")
	statusFollows(env.Client)
}

// statusFollows changes MachineConfiguration/cluster's spec (its log level, which nothing here
// reads) and waits for the status to be written for that generation.
func statusFollows(c client.Client) {
	GinkgoHelper()
	mc := &operatorv1.MachineConfiguration{}
	Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
	level := operatorv1.Debug
	if mc.Spec.LogLevel == operatorv1.Debug {
		level = operatorv1.Normal
	}
	patch := fmt.Sprintf(`{"spec":{"logLevel":%q}}`, level)
	Expect(c.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	generation := mc.Generation
	Eventually(func() int64 {
		got := &operatorv1.MachineConfiguration{}
		Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, got)).To(Succeed())
		return got.Status.ObservedGeneration
	}).Should(Equal(generation), "status written for the new generation")
}

func condition(c client.Client, kind string) func() metav1.Condition {
	return func() metav1.Condition {
		mc := &operatorv1.MachineConfiguration{}
		Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
		if cond := meta.FindStatusCondition(mc.Status.Conditions, kind); cond != nil {
			return *cond
		}
		return metav1.Condition{}
	}
}

// crdsOf returns the CRDs of testenv (the openshift/api ones, and Cluster API's when capi) that
// keep says are wanted.
func crdsOf(capi bool, keep func(*apiextensionsv1.CustomResourceDefinition) bool) []*apiextensionsv1.CustomResourceDefinition {
	GinkgoHelper()
	crds, err := testenv.LoadCRDs("")
	Expect(err).NotTo(HaveOccurred())
	if capi {
		more, err := testenv.LoadCAPICRDs()
		Expect(err).NotTo(HaveOccurred())
		crds = append(crds, more...)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		if keep(crd) {
			out = append(out, crd)
		}
	}
	Expect(out).NotTo(BeEmpty())
	return out
}

func install(env *testenv.Env, crds []*apiextensionsv1.CustomResourceDefinition) {
	GinkgoHelper()
	copies := make([]*apiextensionsv1.CustomResourceDefinition, len(crds))
	for i, crd := range crds {
		copies[i] = crd.DeepCopy()
	}
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: copies})
	Expect(err).NotTo(HaveOccurred())
}

// crdClient is a client of env that knows CRDs.
func crdClient(env *testenv.Env) client.Client {
	GinkgoHelper()
	scheme := runtime.NewScheme()
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// uninstall deletes crds and waits until the API no longer has them.
func uninstall(env *testenv.Env, crds []*apiextensionsv1.CustomResourceDefinition) {
	GinkgoHelper()
	c := crdClient(env)
	for _, crd := range crds {
		Expect(client.IgnoreNotFound(c.Delete(ctx, crd.DeepCopy()))).To(Succeed())
	}
	for _, crd := range crds {
		Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{}))
		}).Should(BeTrue(), crd.Name+" deleted")
	}
}

func named(names ...string) func(*apiextensionsv1.CustomResourceDefinition) bool {
	return func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		for _, n := range names {
			if crd.Name == n {
				return true
			}
		}
		return false
	}
}

// amiOf reads the AMI of Machine API MachineSet name.
func amiOf(c client.Client, name string) func() any {
	return func() any {
		ms := &machinev1beta1.MachineSet{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: name}, ms)).To(Succeed())
		var ps map[string]any
		Expect(json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
		return ps["ami"].(map[string]any)["id"]
	}
}

// cluster50 creates an AWS 5.0 cluster: both streams in coreos-bootimages, the cluster default
// rhel-9, and one unlabelled MachineSet, worker-a, whose pool chooses its stream.
func cluster50(c client.Client, osImageStream bool) {
	GinkgoHelper()
	objs := []client.Object{
		fixtures.Infrastructure(configv1.AWSPlatformType),
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		fixtures.MachineConfiguration(nil),
		fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
	}
	if osImageStream {
		objs = append(objs, fixtures.OSImageStream("rhel-9"))
	}
	Expect(fixtures.Create(ctx, c, objs...)).To(Succeed())
}

const (
	poolCRD          = "machineconfigpools.machineconfiguration.openshift.io"
	osImageStreamCRD = "osimagestreams.machineconfiguration.openshift.io"
)

var _ = Describe("MachineConfigPool", func() {
	It("not served at start: the operator runs, says so, and watches pools once the CRD comes, goes and comes back", func() {
		testenv.LogToGinkgo(1)
		env := testenv.StartForSpecs(testenv.Options{SkipCRD: named(poolCRD)})
		c := env.Client
		cluster50(c, true)
		mgr := operator(env)

		Eventually(amiOf(c, "worker-a")).Should(Equal(fixtures.NewAWSAMIUSEast1), "managed without pools: the cluster default, rhel-9")
		Eventually(condition(c, status.ConditionBootImageUpdateDegraded)).Should(HaveField("Message", ContainSubstring("MachineConfigPool (machineconfigpools.machineconfiguration.openshift.io)")))
		alive(env, mgr)

		By("installing the CRD: a pool choosing rhel-10 moves the MachineSet")
		pools := crdsOf(false, named(poolCRD))
		install(env, pools)
		Eventually(func() error { return c.Create(ctx, fixtures.Pool("worker", "rhel-10")) }).Should(Succeed())
		Eventually(amiOf(c, "worker-a")).Should(Equal(fixtures.RHEL10AWSAMIUSEast1))
		Eventually(condition(c, status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		alive(env, mgr)

		By("removing it while running")
		uninstall(env, pools)
		Eventually(condition(c, status.ConditionBootImageUpdateDegraded)).Should(HaveField("Message", ContainSubstring("MachineConfigPool (machineconfigpools.machineconfiguration.openshift.io)")))
		alive(env, mgr)

		By("installing it again")
		install(env, pools)
		Eventually(func() error { return c.Create(ctx, fixtures.Pool("worker", "rhel-10")) }).Should(Succeed())
		Eventually(amiOf(c, "worker-a")).Should(Equal(fixtures.RHEL10AWSAMIUSEast1))
		Eventually(condition(c, status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		alive(env, mgr)
	})
})

var _ = Describe("OSImageStream", func() {
	It("not served at start, then installed, removed and installed again while running: the operator follows its default each time", func() {
		testenv.LogToGinkgo(1)
		env := testenv.StartForSpecs(testenv.Options{SkipCRD: named(osImageStreamCRD)})
		c := env.Client
		cluster50(c, false)
		Expect(c.Create(ctx, fixtures.Pool("worker", ""))).To(Succeed())
		mgr := operator(env)
		Eventually(amiOf(c, "worker-a")).Should(Equal(fixtures.NewAWSAMIUSEast1), "the release's default, rhel-9")
		alive(env, mgr)

		streams := crdsOf(false, named(osImageStreamCRD))
		By("installing it with rhel-10 the default")
		install(env, streams)
		Eventually(func() error { return fixtures.Create(ctx, c, fixtures.OSImageStream("rhel-10")) }).Should(Succeed())
		Eventually(amiOf(c, "worker-a")).Should(Equal(fixtures.RHEL10AWSAMIUSEast1))
		alive(env, mgr)

		By("removing it: the release's default again")
		uninstall(env, streams)
		Eventually(amiOf(c, "worker-a")).Should(Equal(fixtures.NewAWSAMIUSEast1))
		alive(env, mgr)

		By("installing it again")
		install(env, streams)
		Eventually(func() error { return fixtures.Create(ctx, c, fixtures.OSImageStream("rhel-10")) }).Should(Succeed())
		Eventually(amiOf(c, "worker-a")).Should(Equal(fixtures.RHEL10AWSAMIUSEast1))
		alive(env, mgr)
	})
})

var _ = Describe("The Machine API", func() {
	It("removed and installed again while running: says it is missing, then manages MachineSets again", func() {
		testenv.LogToGinkgo(1)
		env := testenv.StartForSpecs(testenv.Options{})
		c := env.Client
		cluster50(c, true)
		mgr := operator(env)
		Eventually(amiOf(c, "worker-a")).Should(Equal(fixtures.NewAWSAMIUSEast1))

		machineAPI := crdsOf(false, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
			return crd.Spec.Group == machinev1beta1.GroupName
		})
		uninstall(env, machineAPI)
		Eventually(condition(c, status.ConditionBootImageUpdateSupported)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", status.ReasonMachineAPIMissing)))
		alive(env, mgr)

		install(env, machineAPI)
		Eventually(func() error {
			return fixtures.Create(ctx, c, fixtures.MachineSet("worker-b", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))
		}).Should(Succeed())
		Eventually(amiOf(c, "worker-b")).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Eventually(condition(c, status.ConditionBootImageUpdateSupported)).Should(HaveField("Status", metav1.ConditionTrue))
		alive(env, mgr)
	})
})

// capiCluster creates an AWS cluster managing Cluster API MachineSets and MachineDeployments, and
// one Cluster API MachineSet, name, on a template of its own with the old AMI.
func capiCluster(c client.Client, name string) *unstructured.Unstructured {
	GinkgoHelper()
	Expect(fixtures.Create(ctx, c, append(fixtures.ClusterAPIOnAWS(
		fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All), fixtures.ClusterAPIManager(bootimage.MachineDeployments, operatorv1.All)),
		fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion))...)).To(Succeed())
	return capiOwner(c, name)
}

func capiOwner(c client.Client, name string) *unstructured.Unstructured {
	GinkgoHelper()
	Expect(c.Create(ctx, fixtures.AWSMachineTemplate(name+"-0", fixtures.OldAWSAMI))).To(Succeed())
	owner := fixtures.ClusterAPIOwner("MachineSet", name, name+"-0")
	Expect(c.Create(ctx, owner)).To(Succeed())
	return owner
}

// copied says whether owner points at a copy of its template.
func copied(c client.Client, owner *unstructured.Unstructured) func() string {
	return func() string {
		got := owner.DeepCopy()
		Expect(c.Get(ctx, client.ObjectKeyFromObject(owner), got)).To(Succeed())
		name, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "infrastructureRef", "name")
		return name
	}
}

var _ = Describe("Cluster API", func() {
	It("its MachineSet CRD removed and installed again while running: says so, then manages them again", func() {
		testenv.LogToGinkgo(1)
		env := testenv.StartForSpecs(testenv.Options{CAPI: true})
		c := env.Client
		owner := capiCluster(c, "w-1a")
		mgr := operator(env)
		Eventually(copied(c, owner)).ShouldNot(Equal("w-1a-0"))

		sets := crdsOf(true, named("machinesets.cluster.x-k8s.io"))
		uninstall(env, sets)
		Eventually(condition(c, status.ConditionBootImageUpdateDegraded)).Should(HaveField("Message", ContainSubstring("machinesets.cluster.x-k8s.io")))
		alive(env, mgr)

		install(env, sets)
		again := &unstructured.Unstructured{}
		Eventually(func() error {
			again = capiOwnerOrErr(c, "w-1b")
			if again == nil {
				return fmt.Errorf("not yet")
			}
			return nil
		}).Should(Succeed())
		Eventually(copied(c, again)).ShouldNot(Equal("w-1b-0"))
		Eventually(condition(c, status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		alive(env, mgr)
	})

	It("a MachineDeployment CRD whose conversion webhook fails: the rest runs on, status keeps changing, and it is said", func() {
		testenv.LogToGinkgo(1)
		env := testenv.StartForSpecs(testenv.Options{CAPI: true})
		c := env.Client
		owner := capiCluster(c, "w-1a")
		brokenConversion(env)
		// Its controller gives up on its caches soon, to be stopped and retried within the spec.
		env.CacheSyncTimeout = 5 * time.Second
		mgr := operator(env)
		Eventually(copied(c, owner)).ShouldNot(Equal("w-1a-0"))
		alive(env, mgr)
		Eventually(condition(c, status.ConditionBootImageUpdateDegraded)).Should(HaveField("Message", ContainSubstring("Cluster API MachineDeployments are not counted")))
		Eventually(condition(c, status.ConditionBootImageUpdateDegraded)).Should(HaveField("Message", ContainSubstring("The Cluster API MachineDeployment controller stopped and is retried")))
		// Each retry fails alike: said once, not unsaid and said again at each one.
		Consistently(stoppedEvents(c), 3*env.CacheSyncTimeout, time.Second).Should(ConsistOf(int32(1)))
		alive(env, mgr)
		By("a second Cluster API MachineSet is updated all the same")
		second := capiOwner(c, "w-1b")
		Eventually(copied(c, second)).ShouldNot(Equal("w-1b-0"))
		alive(env, mgr)
	})
})

// stoppedEvents returns the count of each Warning Event saying a Cluster API controller stopped
// (the recorder counts an Event said again).
func stoppedEvents(c client.Client) func() []int32 {
	return func() []int32 {
		events := &corev1.EventList{}
		Expect(c.List(ctx, events)).To(Succeed())
		var out []int32
		for _, e := range events.Items {
			if e.Reason == "ClusterAPIControllersNotStarted" && strings.Contains(e.Message, "stopped and is retried") {
				out = append(out, e.Count)
			}
		}
		return out
	}
}

// capiOwnerOrErr creates owner name and its template, nil while the API refuses them.
func capiOwnerOrErr(c client.Client, name string) *unstructured.Unstructured {
	t := fixtures.AWSMachineTemplate(name+"-0", fixtures.OldAWSAMI)
	if err := c.Create(ctx, t); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil
	}
	owner := fixtures.ClusterAPIOwner("MachineSet", name, name+"-0")
	if err := c.Create(ctx, owner); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil
	}
	return owner
}

// brokenConversion makes every list of MachineDeployments at the version the operator reads fail:
// one is stored at another version (v1alpha9, the same schema), and the CRD's conversion webhook
// then points at nothing.
func brokenConversion(env *testenv.Env) {
	GinkgoHelper()
	c, crds := env.Client, crdClient(env)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	key := client.ObjectKey{Name: "machinedeployments.cluster.x-k8s.io"}
	Expect(crds.Get(ctx, key, crd)).To(Succeed())
	stored := crd.Spec.Versions[0].DeepCopy()
	stored.Name = "v1alpha9"
	crd.Spec.Versions[0].Storage = false
	crd.Spec.Versions = append(crd.Spec.Versions, *stored)
	Expect(crds.Update(ctx, crd)).To(Succeed())
	// Served with its new storage version: the apiserver swaps both at once.
	Eventually(func() error {
		return c.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1alpha9", "kind": "MachineDeploymentList"}})
	}).Should(Succeed())
	md := fixtures.ClusterAPIOwner("MachineDeployment", "md-old", "md-old-0")
	Eventually(func() error { return c.Create(ctx, md) }).Should(Succeed())

	Expect(crds.Get(ctx, key, crd)).To(Succeed())
	url := "https://127.0.0.1:1/convert"
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url}, ConversionReviewVersions: []string{"v1"}}}
	Expect(crds.Update(ctx, crd)).To(Succeed())
	Eventually(func() string {
		err := c.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeploymentList"}}, client.InNamespace(testenv.CAPINamespace))
		if err == nil {
			return ""
		}
		return err.Error()
	}).Should(ContainSubstring("conversion webhook"), "lists fail")
}
