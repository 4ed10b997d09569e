package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
	ctx = context.Background()
)

func TestControllers(t *testing.T) {
	testenv.RunSpecs(t, "controllers on a real kube-apiserver", testenv.Waits{Timeout: 30 * time.Second, Polling: 50 * time.Millisecond})
}

var _ = BeforeSuite(func() {
	testenv.LogToGinkgo(1)
	env = testenv.StartForSpecs(testenv.Options{})
	k8s = env.Client
})

// goTypeNames are what an admin must never read: a Go type in a message.
var goTypeNames = []string{"Go value of type", "struct {", "*v1.", "map["}

// Every spec: no Event and no condition of MachineConfiguration/cluster names a Go type.
var _ = AfterEach(func() {
	events := &corev1.EventList{}
	Expect(k8s.List(ctx, events)).To(Succeed())
	var messages []string
	for _, e := range events.Items {
		messages = append(messages, "Event "+e.Reason+": "+e.Message)
	}
	mc := &operatorv1.MachineConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, mc); err == nil {
		for _, c := range mc.Status.Conditions {
			messages = append(messages, "condition "+c.Type+": "+c.Message)
		}
	}
	for _, m := range messages {
		for _, name := range goTypeNames {
			Expect(m).NotTo(ContainSubstring(name), "a message an admin reads names a Go type")
		}
	}
})

// eventNotes returns the messages of the Events with reason, one per occurrence (a repeated
// Event is stored once with a count).
func eventNotes(reason string) func() []string {
	return func() []string {
		list := &corev1.EventList{}
		Expect(k8s.List(ctx, list)).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			for i := int32(0); e.Reason == reason && i < max(e.Count, 1); i++ {
				notes = append(notes, e.Message)
			}
		}
		return notes
	}
}

// recordWrites records the writes of the objects of list's kind from now on, for expectNoWrites.
func recordWrites(list client.ObjectList) *testenv.Writes {
	GinkgoHelper()
	writes, err := env.WatchWrites(ctx, list)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(writes.Stop)
	return writes
}

// expectNoWrites asserts that nothing wrote obj since writes started, over a window that includes
// fresh reconciles of controller, at least reconciles of them: it touches an input every
// controller watches and no decision reads (see resync), waits for the reconciles to finish, then
// closes the window with a barrier write seen on the same watch.
func expectNoWrites(writes *testenv.Writes, obj client.Object, controller string, reconciles int) {
	GinkgoHelper()
	Expect(writtenDuringResync(writes, obj, controller, reconciles)).To(BeEmpty(), "%T %s was written", obj, client.ObjectKeyFromObject(obj))
}

// writtenDuringResync returns what was written to obj since writes started, over a window that
// includes fresh reconciles of controller (see expectNoWrites).
func writtenDuringResync(writes *testenv.Writes, obj client.Object, controller string, reconciles int) []testenv.Write {
	GinkgoHelper()
	before, err := testenv.Reconciles(controller)
	Expect(err).NotTo(HaveOccurred())
	resync()
	Eventually(func() (float64, error) { return testenv.Reconciles(controller) }).Should(BeNumerically(">=", before+float64(reconciles)),
		"the %s controller reconciles after the resync", controller)
	seen, err := writes.Barrier(ctx, k8s, obj)
	Expect(err).NotTo(HaveOccurred())
	return seen
}

// resync makes every controller take its objects again without changing what they decide on, as
// the informers' periodic resync would.
func resync() {
	GinkgoHelper()
	Expect(testenv.Resync(ctx, k8s)).To(Succeed())
}
