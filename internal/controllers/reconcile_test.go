package controllers_test

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest/komega"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// Reconcile called directly, without a manager, for the logic of one object: what a whole-manager
// spec can only observe from outside, such as the result and a refused stale write.
var _ = Describe("MachineSet Reconcile, called directly", func() {
	var (
		recorder    *record.FakeRecorder
		tracker     *controllers.Tracker
		machineSets *controllers.MachineSetReconciler
		status      *controllers.MachineConfigurationReconciler
	)
	image := func(ms client.Object) any {
		var ps map[string]any
		Expect(json.Unmarshal(ms.(*machinev1beta1.MachineSet).Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
		return ps["disks"].([]any)[0].(map[string]any)["image"]
	}

	BeforeEach(func() {
		bootImageCluster(configv1.GCPPlatformType)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		komega.SetClient(k8s)
		gates := kube.GateSource{Reader: k8s, ReleaseVersion: fixtures.ReleaseVersion}
		recorder, tracker = record.NewFakeRecorder(100), controllers.NewTracker()
		machineSets, status = controllers.NewReconcilersForTest(k8s, gates, staticImages, recorder, tracker)
	})

	It("does nothing until the status is computed for the current generation", func() {
		ms := getMachineSet("worker-a")
		Expect(machineSets.Reconcile(ctx, ms)).To(Equal(ctrl.Result{}))
		Expect(komega.Object(ms)()).To(HaveField("ObjectMeta.ResourceVersion", ms.ResourceVersion))
		Expect(tracker.Latest(bootimage.KindMachineSet)).To(BeEmpty(), "no decision taken on a status not there yet")
	})

	It("updates an outdated MachineSet once, then finds it up to date and writes nothing", func() {
		Expect(status.Reconcile(ctx, reconcile.Request{})).To(Equal(ctrl.Result{}))

		Expect(machineSets.Reconcile(ctx, getMachineSet("worker-a"))).To(Equal(ctrl.Result{}))
		ms := getMachineSet("worker-a")
		Expect(image(ms)).To(Equal(fixtures.NewGCPImage))
		Expect(recorder.Events).To(Receive(HavePrefix(fmt.Sprintf("Normal %s Updated boot image from", steps.ReasonBootImageUpdated))))
		Expect(tracker.Latest(bootimage.KindMachineSet)).To(ConsistOf(HaveField("Action", bootimage.Update)))

		Expect(machineSets.Reconcile(ctx, ms)).To(Equal(ctrl.Result{}))
		Expect(komega.Object(ms)()).To(HaveField("ObjectMeta.ResourceVersion", ms.ResourceVersion))
		Expect(tracker.Latest(bootimage.KindMachineSet)).To(ConsistOf(HaveField("Reason", bootimage.ReasonUpToDate)))
	})

	It("loses to a concurrent write: the patch of a stale copy is refused and the object is kept", func() {
		Expect(status.Reconcile(ctx, reconcile.Request{})).To(Equal(ctrl.Result{}))
		stale := getMachineSet("worker-a")
		touched := getMachineSet("worker-a")
		touched.Annotations = map[string]string{"owner": "someone-else"}
		Expect(k8s.Update(ctx, touched)).To(Succeed())

		_, err := machineSets.Reconcile(ctx, stale)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
		Expect(komega.Object(touched)()).To(And(
			HaveField("ObjectMeta.ResourceVersion", touched.ResourceVersion),
			WithTransform(image, Equal(fixtures.OldGCPImage))))
		Expect(tracker.Latest(bootimage.KindMachineSet)).To(BeEmpty(), "a refused write is not reported as done")
	})

	It("is not selected once the admin opts out", func() {
		optOut := []byte(`{"spec":{"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"None"}}]}}}`)
		Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json", optOut))).To(Succeed())
		Expect(status.Reconcile(ctx, reconcile.Request{})).To(Equal(ctrl.Result{}))
		Expect(machineConfiguration().Status.ManagedBootImagesStatus.MachineManagers).To(ContainElement(HaveField("Selection.Mode", operatorv1.None)))

		ms := getMachineSet("worker-a")
		Expect(machineSets.Reconcile(ctx, ms)).To(Equal(ctrl.Result{}))
		Expect(komega.Object(ms)()).To(HaveField("ObjectMeta.ResourceVersion", ms.ResourceVersion))
		Expect(tracker.Latest(bootimage.KindMachineSet)).To(ConsistOf(HaveField("Reason", bootimage.ReasonNotSelected)))
	})
})
