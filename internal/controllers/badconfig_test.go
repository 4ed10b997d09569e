package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedding "github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// machineConfigurationEvents returns "reason: message" of the Events about MachineConfiguration/cluster.
func machineConfigurationEvents() []string {
	list := &corev1.EventList{}
	Expect(k8s.List(ctx, list)).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "MachineConfiguration" && e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

var _ = Describe("Bad configuration shows where an admin looks", func() {
	BeforeEach(func() {
		DeferCleanup(func() { Expect(k8s.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace("default"))).To(Succeed()) })
	})
	start := func() {
		mgr := startOperator(embedding.Options{Images: staticImages})
		DeferCleanup(mgr.Stop)
	}

	It("names an invalid Partial selector and clears when it is fixed", func() {
		bootImageCluster(configv1.GCPPlatformType)
		start()
		bad := []byte(`{"spec":{"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"Partial","partial":{"machineResourceSelector":{"matchExpressions":[{"key":"role","operator":"Among","values":["infra"]}]}}}}]}}}`)
		Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json", bad))).To(Succeed())
		Eventually(condition(status.ConditionConfigurationDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", And(ContainSubstring("machineResourceSelector of machinesets is invalid"), ContainSubstring(`"Among" is not a valid label selector operator`)))))
		Eventually(machineConfigurationEvents).Should(ContainElement(ContainSubstring("machineResourceSelector of machinesets is invalid")))

		good := []byte(`{"spec":{"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"Partial","partial":{"machineResourceSelector":{"matchExpressions":[{"key":"role","operator":"In","values":["infra"]}]}}}}]}}}`)
		Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json", good))).To(Succeed())
		Eventually(condition(status.ConditionConfigurationDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
	})

	It("blames the stream when it lacks the cluster's own architecture, and recovers with a good stream", func() {
		bootImageCluster(configv1.GCPPlatformType)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: kube.MCONamespace, Name: kube.BootImagesConfigMapName}, cm)).To(Succeed())
		armOnly := fixtures.Stream()
		delete(armOnly.Architectures, "x86_64")
		cm.Data = fixtures.BootImagesConfigMap(armOnly, "4.20.3").Data
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		start()

		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring("the rhel-9 stream in coreos-bootimages has no x86_64 boot images, the control plane's architecture"))))
		Eventually(machineConfigurationEvents).Should(ContainElement(ContainSubstring("has no x86_64 boot images")))

		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: kube.MCONamespace, Name: kube.BootImagesConfigMapName}, cm)).To(Succeed())
		cm.Data = fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3").Data
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		Eventually(func() any { return providerSpec("worker-a")["disks"].([]any)[0].(map[string]any)["image"] }).Should(Equal(fixtures.NewGCPImage))
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
	})

	It("blames a stream that does not parse even with no MachineSet to say so", func() {
		bootImageCluster(configv1.GCPPlatformType)
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: kube.MCONamespace, Name: kube.BootImagesConfigMapName}, cm)).To(Succeed())
		cm.Data["stream"] = `{"architectures": "nope"}`
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		start()
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring("ConfigMap openshift-machine-config-operator/coreos-bootimages key stream: not a CoreOS stream"))))
	})

	It("says so when ClusterVersion is missing, and still updates boot images", func() {
		bootImageCluster(configv1.GCPPlatformType)
		Expect(k8s.DeleteAllOf(ctx, &configv1.ClusterVersion{})).To(Succeed())
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		start()
		Eventually(func() any { return providerSpec("worker-a")["disks"].([]any)[0].(map[string]any)["image"] }).Should(Equal(fixtures.NewGCPImage))
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Message", ContainSubstring("ClusterVersion/version not found")))
		Expect(machineSetEvents("worker-a")()).NotTo(ContainElement(ContainSubstring("is updating")))
		Eventually(eventNotes(controllers.ReasonClusterVersionMissing)).Should(ContainElement(ContainSubstring("ClusterVersion/version not found")))
		Expect(eventNotes(status.ReasonInvalidSelection)()).NotTo(ContainElement(ContainSubstring("ClusterVersion")), "nothing is wrong with the selection")
	})
})

var _ = Describe("Cloud lookups that keep failing", func() {
	It("become an Error CloudLookupFailed after the grace period, and heal without any cluster change", func() {
		server := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(server.Close)
		server.Unavailable.Store(true)
		awsClusterAt(server)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))).To(Succeed())
		mgr := startOperatorWithHooks(embedding.Options{CloudRootCAs: server.RootCAs()}, seams.Hooks{CloudErrorGrace: 2 * time.Second, CloudRetryInterval: time.Second})
		DeferCleanup(mgr.Stop)

		Eventually(condition(status.ConditionBootImageUpdateDegraded), "60s").Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", And(ContainSubstring("MachineSet openshift-machine-api/worker-a: CloudLookupFailed"), ContainSubstring("Unavailable")))))
		Eventually(machineSetEvents("worker-a")).Should(ContainElement(ContainSubstring("CloudLookupFailed")))
		Expect(amiOf("worker-a")()).To(Equal(fixtures.OldAWSAMI))

		server.Unavailable.Store(false)
		Eventually(amiOf("worker-a"), "30s").Should(Equal(fixtures.NewAWSAMIUSEast1))
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		failures := 0
		for _, e := range machineSetEvents("worker-a")() {
			if len(e) > len("CloudLookupFailed") && e[:len("CloudLookupFailed")] == "CloudLookupFailed" {
				failures++
			}
		}
		Expect(failures).To(Equal(1), "one Event for the failure, not one per retry")
		Expect(machineConfiguration().Status.ManagedBootImagesStatus.MachineManagers).To(ContainElement(HaveField("Resource", operatorv1.MachineSets)))
	})
})
