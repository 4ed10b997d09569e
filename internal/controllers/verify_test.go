package controllers_test

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	embedding "github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// gcpImageNotFound is how the Machine API's GCP provider reports an instance insert that
// Compute Engine refused for its boot image.
const gcpImageNotFound = `error launching instance: googleapi: Error 400: Invalid value for field 'resource.disks[0].initializeParams.sourceImage': 'projects/rhcos-cloud/global/images/new'. The referenced image resource cannot be found., invalid`

// gcpNoCapacity is a refusal for capacity, which says nothing of the image.
const gcpNoCapacity = `error launching instance: googleapi: Error 503: The zone 'projects/demo/zones/us-central1-a' does not have enough resources available to fulfill the request. ZONE_RESOURCE_POOL_EXHAUSTED`

// newMachine creates Machine name of MachineSet ms from its current providerSpec, with status.
func newMachine(name, ms string, st machinev1beta1.MachineStatus) {
	GinkgoHelper()
	m := fixtures.Machine(name, ms, string(getMachineSet(ms).Spec.Template.Spec.ProviderSpec.Value.Raw))
	Expect(k8s.Create(ctx, m)).To(Succeed())
	m.Status = st
	Expect(k8s.Status().Update(ctx, m)).To(Succeed())
}

func failedOn(message string) machinev1beta1.MachineStatus {
	phase := "Failed"
	return machinev1beta1.MachineStatus{Phase: &phase, ErrorMessage: &message}
}

func launchRetrying(message string) machinev1beta1.MachineStatus {
	phase := "Provisioning"
	ps := `{"conditions":[{"type":"MachineCreated","status":"False","reason":"MachineCreationFailed","message":` + strconv.Quote(message) + `}]}`
	return machinev1beta1.MachineStatus{Phase: &phase, ProviderStatus: &runtime.RawExtension{Raw: []byte(ps)}}
}

func joined(node string) machinev1beta1.MachineStatus {
	phase := "Running"
	return machinev1beta1.MachineStatus{Phase: &phase, NodeRef: &corev1.ObjectReference{Kind: "Node", Name: node}}
}

func history(ms string) func() bootimage.History {
	return func() bootimage.History {
		h, err := bootimage.HistoryOf(getMachineSet(ms).Annotations)
		Expect(err).NotTo(HaveOccurred())
		return h
	}
}

func gcpImageOf(ms string) func() any {
	return func() any { return providerSpec(ms)["disks"].([]any)[0].(map[string]any)["image"] }
}

var _ = Describe("Boot image verification", func() {
	var mgr *testenv.Manager
	start := func() {
		mgr = startOperator(embedding.Options{Images: staticImages})
	}
	BeforeEach(func() {
		bootImageCluster(configv1.GCPPlatformType)
		DeferCleanup(func() {
			if mgr != nil {
				Expect(mgr.Stop()).To(Succeed())
				mgr = nil
			}
			Expect(k8s.DeleteAllOf(ctx, &machinev1beta1.Machine{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		})
	})
	updated := func(name string) {
		GinkgoHelper()
		Eventually(gcpImageOf(name)).Should(Equal(fixtures.NewGCPImage))
		Eventually(history(name)).Should(ConsistOf(And(
			HaveField("From", fixtures.OldGCPImage), HaveField("To", fixtures.NewGCPImage),
			HaveField("By", bootimage.ByOperator), HaveField("Outcome", ""), HaveField("Revert", Not(BeEmpty())))))
	}

	It("restores, holds and degrades when a machine fails on the new image, once, across a restart", func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		start()
		updated("worker-a")

		// A restart in the middle: the record is on the object, not in the process.
		Expect(mgr.Stop()).To(Succeed())
		newMachine("worker-a-1", "worker-a", failedOn(gcpImageNotFound))
		start()

		Eventually(gcpImageOf("worker-a")).Should(Equal(fixtures.OldGCPImage))
		h := history("worker-a")()
		Expect(h).To(HaveLen(2))
		Expect(h[0]).To(And(HaveField("Outcome", bootimage.Failed), HaveField("Machine", "worker-a-1"), HaveField("Error", gcpImageNotFound)))
		Expect(h[1]).To(And(HaveField("By", bootimage.ByRestore), HaveField("From", fixtures.NewGCPImage), HaveField("To", fixtures.OldGCPImage)))
		hold, held, err := bootimage.HoldOf(getMachineSet("worker-a").Annotations)
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(BeTrue())
		Expect(hold).To(And(HaveField("Target", fixtures.NewGCPImage), HaveField("Machine", "worker-a-1")))
		Eventually(machineSetEvents("worker-a")).Should(ContainElements(
			ContainSubstring("BootImageRestored: Restored boot image "+fixtures.OldGCPImage+" after machine worker-a-1 failed on "+fixtures.NewGCPImage),
			HavePrefix("BootImageHeld: ")))
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", bootimage.ReasonBootImageRestored),
			HaveField("Message", ContainSubstring("1 restored to the previous boot image and held: MachineSet openshift-machine-api/worker-a"))))

		// Held: neither updated again nor restored twice, by this process or the next.
		rv := getMachineSet("worker-a").ResourceVersion
		resync()
		Expect(mgr.Stop()).To(Succeed())
		start()
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Reason", bootimage.ReasonBootImageRestored))
		before, err := testenv.Reconciles("machineset")
		Expect(err).NotTo(HaveOccurred())
		resync()
		Eventually(func() (float64, error) { return testenv.Reconciles("machineset") }).Should(BeNumerically(">", before))
		Expect(getMachineSet("worker-a").ResourceVersion).To(Equal(rv))
		Expect(eventNotes(steps.ReasonBootImageRestored)()).To(HaveLen(1))
	})

	It("takes a capacity failure as no evidence, and a machine that joins as proof", func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-b", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		start()
		updated("worker-b")
		rv := getMachineSet("worker-b").ResourceVersion
		before, err := testenv.Reconciles("machineset")
		Expect(err).NotTo(HaveOccurred())
		newMachine("worker-b-1", "worker-b", launchRetrying(gcpNoCapacity))
		Eventually(func() (float64, error) { return testenv.Reconciles("machineset") }).Should(BeNumerically(">", before))
		Expect(getMachineSet("worker-b").ResourceVersion).To(Equal(rv), "a capacity failure restores nothing")

		newMachine("worker-b-2", "worker-b", joined("node-b-2"))
		Eventually(history("worker-b")).Should(ConsistOf(And(HaveField("Outcome", bootimage.Verified), HaveField("Machine", "worker-b-2"))))
		Eventually(machineSetEvents("worker-b")).Should(ContainElement("BootImageVerified: Machine worker-b-2 booted " + fixtures.NewGCPImage + " and became a node: the new boot image is verified"))
		Expect(gcpImageOf("worker-b")()).To(Equal(fixtures.NewGCPImage))
		Expect(getMachineSet("worker-b").Annotations).NotTo(HaveKey(bootimage.HoldAnnotation))
		Expect(eventNotes(steps.ReasonBootImageRestored)()).To(BeEmpty())
	})

	It("does not undo an image someone else wrote after the change", func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-d", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		start()
		updated("worker-d")
		const custom = "projects/my-project/global/images/my-golden-image"
		ms := getMachineSet("worker-d")
		ms.Spec.Template.Spec.ProviderSpec.Value.Raw = []byte(fixtures.GCPProviderSpec(custom))
		Expect(k8s.Update(ctx, ms)).To(Succeed())
		m := fixtures.Machine("worker-d-1", "worker-d", fixtures.GCPProviderSpec(fixtures.NewGCPImage))
		Expect(k8s.Create(ctx, m)).To(Succeed())
		m.Status = failedOn(gcpImageNotFound)
		Expect(k8s.Status().Update(ctx, m)).To(Succeed())

		Eventually(machineSetEvents("worker-d")).Should(ContainElement(ContainSubstring("but the object now has " + custom + ", written by someone else: not restored")))
		Expect(gcpImageOf("worker-d")()).To(Equal(custom))
		Expect(history("worker-d")()).To(ConsistOf(And(HaveField("Outcome", bootimage.Failed), HaveField("Machine", "worker-d-1"))))
		Expect(getMachineSet("worker-d").Annotations).NotTo(HaveKey(bootimage.HoldAnnotation))
	})

	It("fails the image when a new machine is no node within the deadline while one on the previous image became one", func() {
		clk := clocktesting.NewFakeClock(time.Now())
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-e", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		mgr = startOperator(embedding.Options{Images: staticImages, Clock: clk})
		updated("worker-e")
		phase := "Provisioned"
		newMachine("worker-e-1", "worker-e", machinev1beta1.MachineStatus{Phase: &phase})
		previous := fixtures.Machine("worker-e-0", "worker-e", fixtures.GCPProviderSpec(fixtures.OldGCPImage))
		Expect(k8s.Create(ctx, previous)).To(Succeed())
		previous.Status = joined("node-e-0")
		Expect(k8s.Status().Update(ctx, previous)).To(Succeed())
		before, err := testenv.Reconciles("machineset")
		Expect(err).NotTo(HaveOccurred())
		resync()
		Eventually(func() (float64, error) { return testenv.Reconciles("machineset") }).Should(BeNumerically(">", before))
		Expect(gcpImageOf("worker-e")()).To(Equal(fixtures.NewGCPImage), "within the deadline: still pending")

		clk.Step(21 * time.Minute)
		resync()
		Eventually(gcpImageOf("worker-e")).Should(Equal(fixtures.OldGCPImage))
		Expect(history("worker-e")()[0]).To(And(HaveField("Outcome", bootimage.Failed), HaveField("Machine", "worker-e-1"),
			HaveField("Error", "did not become a node within 20m0s of its creation, while a machine on "+fixtures.OldGCPImage+" did")))
		Expect(getMachineSet("worker-e").Annotations).To(HaveKey(bootimage.HoldAnnotation))
	})

	It("updates a canary first, and the rest once a canary machine has booted the image", func() {
		canary := fixtures.MachineSet("canary", fixtures.GCPProviderSpec(fixtures.OldGCPImage))
		canary.Labels[bootimage.CanaryLabel] = "true"
		Expect(fixtures.Create(ctx, k8s, canary, fixtures.MachineSet("worker-c", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		start()
		updated("canary")
		Eventually(machineSetEvents("worker-c")).Should(ContainElement(HavePrefix("WaitingForCanary: ")))
		Expect(gcpImageOf("worker-c")()).To(Equal(fixtures.OldGCPImage))

		newMachine("canary-1", "canary", joined("node-canary-1"))
		updated("worker-c")
		Eventually(history("canary")).Should(ConsistOf(HaveField("Outcome", bootimage.Verified)))
	})
})
