package controllers_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// writeCounter counts the operator's writes as its client sends them.
type writeCounter struct{ status, machineSet atomic.Int64 }

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPatch || req.Method == http.MethodPut {
			switch {
			case strings.HasSuffix(req.URL.Path, "/machineconfigurations/cluster/status"):
				w.status.Add(1)
			case strings.HasSuffix(req.URL.Path, "/machinesets/worker-a"):
				w.machineSet.Add(1)
			}
		}
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var _ = Describe("A second writer", func() {
	// A shorter window than an hour with the same per-interval bound: at most ContestedWrites
	// status writes per ContestInterval while the second writer is seen.
	const (
		interval = 10 * time.Second
		budget   = 2
		window   = 2 * interval
		// Every interval the window touches, plus the writes of decisions changing before the
		// first revert is seen.
		bound = budget*(int(window/interval)+1) + 2
	)

	It("is reported, on the status and on a MachineSet, and the operator backs off", func() {
		bootImageCluster(configv1.AWSPlatformType)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))).To(Succeed())
		writes := &writeCounter{}
		counted := *env
		counted.Config = rest.CopyConfig(env.Config)
		counted.Config.Wrap(writes.wrap)
		mgr, err := counted.StartOperatorWithHooks(seams.Hooks{ContestInterval: interval},
			controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: staticImages, ContestedWrites: budget})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })
		Eventually(amiOf("worker-a")).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(HaveField("Status", metav1.ConditionFalse))

		// Every Degraded condition the API server stores.
		var mu sync.Mutex
		var degraded []metav1.Condition
		wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		w, err := wc.Watch(ctx, &operatorv1.MachineConfigurationList{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if mc, ok := ev.Object.(*operatorv1.MachineConfiguration); ok {
					if c := meta.FindStatusCondition(mc.Status.Conditions, status.ConditionBootImageUpdateDegraded); c != nil {
						mu.Lock()
						degraded = append(degraded, *c)
						mu.Unlock()
					}
				}
			}
		}()

		// As the MCO's syncMachineConfiguration: a status computed earlier (its own conditions,
		// as its boot image controller's defaults), written whole after a refetch, every second.
		stale := machineConfiguration().Status.DeepCopy()
		stale.Conditions = []metav1.Condition{
			{Type: status.ConditionBootImageUpdateProgressing, Status: metav1.ConditionFalse, Reason: "NA", Message: "Reconciled 0 of 0 MAPI MachineSets", LastTransitionTime: metav1.Now()},
			{Type: status.ConditionBootImageUpdateDegraded, Status: metav1.ConditionFalse, Reason: "NA", Message: "0 Degraded MAPI MachineSets", LastTransitionTime: metav1.Now()},
		}
		// The MCO's sync always sets the node disruption policies, which the API requires once set.
		stale.NodeDisruptionPolicyStatus.ClusterPolicies.SSHKey.Actions = []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.NoneStatusAction}}
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		everySecond(done, &wg, func() {
			mc := &operatorv1.MachineConfiguration{}
			if k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, mc) == nil {
				mc.Status = *stale.DeepCopy()
				if err := k8s.Status().Update(ctx, mc, client.FieldOwner("machine-config-operator")); err != nil {
					GinkgoWriter.Printf("second writer: %v\n", err)
				}
			}
		})
		// As the MCO's own boot image controller still running (on other boot images): another
		// RHCOS image, every second.
		other := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"spec":{"providerSpec":{"value":{"ami":{"id":"`+fixtures.OldAWSAMI+`"}}}}}}}`))
		everySecond(done, &wg, func() {
			_ = k8s.Patch(ctx, getMachineSet("worker-a"), other, client.FieldOwner("machine-set-boot-image-controller"))
		})
		DeferCleanup(func() { close(done); wg.Wait() })
		statusBefore := writes.status.Load()

		// The status writes stay bounded over the whole window. A window, not a barrier: the claim
		// is a rate (writes per ContestInterval against a writer reverting every second), which no
		// single observable event can close; two intervals are the fewest that tell a ration
		// (at most 8 writes) from none (one answer per revert, about 20).
		Consistently(func() int64 { return writes.status.Load() - statusBefore }, window, time.Second).Should(BeNumerically("<=", bound))
		Expect(writes.machineSet.Load()).To(BeNumerically("<=", bootimage.HotLoopLimit), "MachineSet patches: at most the hot-loop limit")

		secondWriter := eventNotes(status.ReasonSecondWriter)()
		Expect(secondWriter).To(HaveLen(1), "one Warning Event")
		Expect(secondWriter[0]).To(And(
			ContainSubstring(`status.conditions[BootImageUpdateProgressing] of MachineConfiguration/cluster was rewritten by field manager "machine-config-operator"`),
			ContainSubstring("is the MCO's own boot image controller still enabled"),
			ContainSubstring("at most 2 times per 10s")))
		mu.Lock()
		Expect(degraded).To(ContainElement(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", status.ReasonSecondWriter))))
		mu.Unlock()
		Expect(machineSetEvents("worker-a")()).To(ContainElement(And(
			HavePrefix("HotLoopDetected: Boot image update failed: refusing to reconcile machineset worker-a, hot loop detected"),
			ContainSubstring(`last written by field manager "machine-set-boot-image-controller": is the MCO's own boot image controller still enabled?`))))
		GinkgoWriter.Printf("operator writes over %s: %d status (bound %d), %d MachineSet (bound %d)\n", window, writes.status.Load()-statusBefore, bound, writes.machineSet.Load(), bootimage.HotLoopLimit)
	})
})

// everySecond calls write once a second until done is closed, as another writer on the cluster
// would, in a goroutine wg waits for.
func everySecond(done <-chan struct{}, wg *sync.WaitGroup, write func()) {
	go func() {
		defer GinkgoRecover()
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			write()
		}
	}()
}
