package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/test/expect"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// Reconcilers built from the package's exported types on the suite's API server client, without a
// manager or a cache, called once per step as karpenter's ExpectReconcileSucceeded does: what one
// Reconcile writes, and that the next one writes nothing.
var _ = Describe("One Reconcile at a time, on the API server's client", func() {
	var (
		writes      *expect.Writes
		machineSets reconcile.Reconciler
		status      *controllers.MachineConfigurationReconciler
		tracker     *controllers.Tracker
	)
	// A name of its own: the suite's other specs use worker-*.
	const name = "direct-aws-1a"
	key := client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: name}
	singleton := client.ObjectKey{}

	BeforeEach(func() {
		bootImageCluster(configv1.AWSPlatformType) // its DeferCleanup deletes the cluster objects and MachineSets
		var counted client.Client
		wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		counted, writes = expect.CountingWrites(wc)
		gates := kube.GateSource{Reader: counted, ReleaseVersion: fixtures.ReleaseVersion}
		tracker = controllers.NewTracker()
		var ms *controllers.MachineSetReconciler
		ms, status = controllers.NewReconcilersForTest(counted, gates, staticImages, record.NewFakeRecorder(100), tracker)
		// The Get controller-runtime's builder does before an ObjectReconciler, from the same client.
		machineSets = reconcile.AsReconciler[*machinev1beta1.MachineSet](counted, ms)
	})

	It("MachineConfiguration: writes the effective status in one Reconcile, and nothing in the next", func() {
		Expect(machineConfiguration().Status.ObservedGeneration).To(BeZero())

		Expect(expect.ExpectReconcileSucceeded(ctx, status, singleton)).To(BeZero())
		Expect(writes.Counts()).To(HaveKeyWithValue(HaveSuffix("status MachineConfiguration"), BeNumerically(">=", 1)), "the status written")
		mc := machineConfiguration()
		Expect(mc.Status.ObservedGeneration).To(Equal(mc.Generation))
		Expect(mc.Status.ManagedBootImagesStatus.MachineManagers).To(ContainElement(HaveField("Resource", BeEquivalentTo("machinesets"))))

		writes.Reset()
		Expect(expect.ExpectReconcileSucceeded(ctx, status, singleton)).To(BeZero())
		Expect(writes.Counts()).To(BeEmpty(), "the second Reconcile writes nothing")
		Expect(machineConfiguration().ResourceVersion).To(Equal(mc.ResourceVersion))
	})

	It("MachineSet: patches an outdated AWS MachineSet's AMI in one Reconcile, and writes nothing in the next", func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet(name, fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))).To(Succeed())
		expect.ExpectReconcileSucceeded(ctx, status, singleton) // the MachineSets wait for the effective status
		writes.Reset()

		Expect(expect.ExpectReconcileSucceeded(ctx, machineSets, key)).To(BeZero())
		Expect(writes.Counts()).To(Equal(map[string]int{"Patch MachineSet": 1}), "one patch, of the AMI")
		Expect(amiOf(name)()).To(Equal(fixtures.NewAWSAMIUSEast1))
		Expect(tracker.Latest(bootimage.KindMachineSet)).To(ConsistOf(HaveField("Action", bootimage.Update)))
		updated := getMachineSet(name)

		writes.Reset()
		Expect(expect.ExpectReconcileSucceeded(ctx, machineSets, key)).To(BeZero())
		Expect(writes.Counts()).To(BeEmpty(), "the second Reconcile writes nothing")
		Expect(getMachineSet(name).ResourceVersion).To(Equal(updated.ResourceVersion))
		Expect(tracker.Latest(bootimage.KindMachineSet)).To(ConsistOf(HaveField("Reason", bootimage.ReasonUpToDate)))
	})
})
