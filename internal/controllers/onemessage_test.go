package controllers_test

import (
	"strings"
	"time"

	"github.com/coreos/stream-metadata-go/stream"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// bootImagesConfigMap returns the stored coreos-bootimages ConfigMap.
func bootImagesConfigMap() *corev1.ConfigMap {
	GinkgoHelper()
	cm := &corev1.ConfigMap{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: kube.MCONamespace, Name: kube.BootImagesConfigMapName}, cm)).To(Succeed())
	return cm
}

var _ = Describe("One cluster-level problem is one message", func() {
	BeforeEach(func() {
		DeferCleanup(func() { Expect(k8s.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace("default"))).To(Succeed()) })
	})
	workers := []string{"worker-a", "worker-b", "worker-c"}
	seed := func() {
		bootImageCluster(configv1.GCPPlatformType)
		for _, name := range workers {
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet(name, fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		}
		mgr := startOperator(controllers.Options{Images: staticImages})
		DeferCleanup(mgr.Stop)
		Eventually(func() any { return providerSpec("worker-c")["disks"].([]any)[0].(map[string]any)["image"] }).Should(Equal(fixtures.NewGCPImage))
	}
	// saidOnce checks that problem is in Degraded once, in one Warning Event on MachineConfiguration
	// with reason, and in no MachineSet's Events.
	saidOnce := func(reason, problem string) {
		GinkgoHelper()
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring(problem))))
		Expect(strings.Count(condition(status.ConditionBootImageUpdateDegraded)().Message, problem)).To(Equal(1))
		Expect(condition(status.ConditionBootImageUpdateDegraded)().Message).NotTo(ContainSubstring("failed:"))
		// (The skew guard says separately that upgrades are blocked meanwhile.)
		withReason := func() []string {
			var out []string
			for _, e := range machineConfigurationEvents() {
				if strings.HasPrefix(e, reason+": ") {
					out = append(out, e)
				}
			}
			return out
		}
		Eventually(withReason).Should(ConsistOf(HavePrefix(reason + ": " + problem)))
		for _, name := range workers {
			Expect(machineSetEvents(name)()).NotTo(ContainElement(HavePrefix(reason)), name)
		}
	}

	It("an unparsable stream ConfigMap: one Warning Event on MachineConfiguration and one Degraded entry", func() {
		seed()
		cm := bootImagesConfigMap()
		cm.Data["stream"] = "{not json"
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		saidOnce("InvalidStream", "ConfigMap openshift-machine-config-operator/coreos-bootimages key stream: not a CoreOS stream")

		cm = bootImagesConfigMap()
		cm.Data = fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3").Data
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
	})

	It("a missing stream ConfigMap: the same", func() {
		seed()
		Expect(k8s.Delete(ctx, bootImagesConfigMap())).To(Succeed())
		saidOnce("StreamMissing", "ConfigMap openshift-machine-config-operator/coreos-bootimages not found: no boot images to compare against")
	})
})

// missingAMI is a stream AMI that the fake EC2 does not have in us-east-1.
const missingAMI = "ami-0deadbeefdeadbeef"

// missingTargetCluster is an AWS cluster on a fake EC2 whose stream names missingAMI in us-east-1,
// with MachineSet worker-a there on an old RHCOS AMI.
func missingTargetCluster() *fakecloud.EC2 {
	GinkgoHelper()
	server := fakecloud.NewEC2(fixtures.AWSImages())
	DeferCleanup(server.Close)
	awsClusterAt(server)
	s := fixtures.Stream()
	s.Architectures["x86_64"].Images.Aws.Regions["us-east-1"] = stream.SingleImage{Release: fixtures.StreamRelease, Image: missingAMI}
	cm := bootImagesConfigMap()
	cm.Data = fixtures.BootImagesConfigMap(s, "4.20.3").Data
	Expect(k8s.Update(ctx, cm)).To(Succeed())
	Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))).To(Succeed())
	return server
}

var _ = Describe("A stream image the cloud keeps unavailable", func() {
	BeforeEach(func() {
		DeferCleanup(func() { Expect(k8s.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace("default"))).To(Succeed()) })
	})

	It("is a Skip at first, and Degraded naming the AMI and the region once it lasts past the cloud grace period", func() {
		server := missingTargetCluster()
		mgr := startOperatorWithHooks(controllers.Options{CloudRootCAs: server.RootCAs()}, seams.Hooks{CloudErrorGrace: 2 * time.Second, CloudRetryInterval: time.Second})
		DeferCleanup(mgr.Stop)

		Eventually(machineSetEvents("worker-a")).Should(ContainElement("TargetImageUnavailable: Boot image update skipped: target AMI " + missingAMI + " is not found in us-east-1"))
		Eventually(condition(status.ConditionBootImageUpdateDegraded), "30s").Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", And(ContainSubstring("MachineSet openshift-machine-api/worker-a: TargetImageUnavailable: target AMI "+missingAMI+" is not found in us-east-1 for more than 2s"),
				ContainSubstring("new machines keep booting "+fixtures.OldAWSAMI)))))
		Eventually(machineSetEvents("worker-a")).Should(ContainElement(HavePrefix("TargetImageUnavailable: Boot image update failed: target AMI " + missingAMI)))
		Expect(amiOf("worker-a")()).To(Equal(fixtures.OldAWSAMI))

		By("healing when the stream names an AMI the region has")
		cm := bootImagesConfigMap()
		cm.Data = fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3").Data
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		Eventually(amiOf("worker-a")).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
	})

	It("keeps the grace period across a restart: it runs from the first Event that said Skip", func() {
		server := missingTargetCluster()
		hooks := seams.Hooks{CloudErrorGrace: time.Hour, CloudRetryInterval: time.Second}
		mgr := startOperatorWithHooks(controllers.Options{CloudRootCAs: server.RootCAs()}, hooks)
		skipped := "TargetImageUnavailable: Boot image update skipped: target AMI " + missingAMI + " is not found in us-east-1"
		Eventually(machineSetEvents("worker-a")).Should(ContainElement(skipped))
		Expect(mgr.Stop()).To(Succeed())

		By("restarting as if the first Skip had been said an hour and a minute ago")
		events := &corev1.EventList{}
		Expect(k8s.List(ctx, events, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		aged := 0
		for i := range events.Items {
			if e := &events.Items[i]; e.Reason+": "+e.Message == skipped {
				e.FirstTimestamp = metav1.NewTime(time.Now().Add(-time.Hour - time.Minute))
				Expect(k8s.Update(ctx, e)).To(Succeed())
				aged++
			}
		}
		Expect(aged).To(Equal(1))
		mgr = startOperatorWithHooks(controllers.Options{CloudRootCAs: server.RootCAs()}, hooks)
		DeferCleanup(mgr.Stop)
		Eventually(condition(status.ConditionBootImageUpdateDegraded), "30s").Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring("MachineSet openshift-machine-api/worker-a: TargetImageUnavailable: target AMI "+missingAMI+" is not found in us-east-1 for more than 1h0m0s"))))
	})
})
