package controllers_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// apiWrites counts the writes the API server reports on a watch, by object name.
type apiWrites struct {
	mu     sync.Mutex
	byName map[string]int
	last   client.Object
}

// watchWrites watches list (in namespace, "" for all) until the spec ends.
func watchWrites(list client.ObjectList, namespace string) *apiWrites {
	GinkgoHelper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, list, client.InNamespace(namespace))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	c := &apiWrites{byName: map[string]int{}}
	go func() {
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(client.Object)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			c.mu.Lock()
			c.byName[obj.GetName()]++
			c.last = obj
			c.mu.Unlock()
		}
	}()
	return c
}

// observedGeneration is the status.observedGeneration of the last MachineConfiguration the watch
// delivered: a watch delivers an object's writes in order, so once it shows an answer, every
// write before that answer has been counted.
func (c *apiWrites) observedGeneration() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	mc, _ := c.last.(*operatorv1.MachineConfiguration)
	if mc == nil {
		return 0
	}
	return mc.Status.ObservedGeneration
}

func (c *apiWrites) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.byName {
		n += v
	}
	return n
}

func (c *apiWrites) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.byName {
		out[k] = v
	}
	return out
}

// errorsCounted reads bootimage_errors_total{kind, reason} of reg.
func errorsCounted(reg prometheus.Gatherer, kind, reason string) float64 {
	return metric(reg, "bootimage_errors_total", "kind", kind, "reason", reason)()
}

// warningEvents returns, per MachineSet, how many Warning Events with reason were recorded
// (an Event repeated by the recorder counts its count).
func warningEvents(reason string) map[string]int {
	list := &corev1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
	out := map[string]int{}
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning && e.Reason == reason && e.InvolvedObject.Kind == "MachineSet" {
			out[e.InvolvedObject.Name] += int(max(e.Count, 1))
		}
	}
	return out
}

// awsMachineSets creates n MachineSets on the outdated AMI, alternating between us-east-1 and
// us-west-2, and returns their names.
func awsMachineSets(n int) []string {
	GinkgoHelper()
	var names []string
	for i := range n {
		region := []string{"us-east-1", "us-west-2"}[i%2]
		name := fmt.Sprintf("worker-%02d", i)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet(name, fixtures.AWSProviderSpec(region, fixtures.OldAWSAMI)))).To(Succeed())
		names = append(names, name)
	}
	return names
}

func allUpdated(names []string) func() []string {
	return func() []string {
		var behind []string
		for i, name := range names {
			want := []string{fixtures.NewAWSAMIUSEast1, fixtures.NewAWSAMIUSWest2}[i%2]
			if amiOf(name)() != want {
				behind = append(behind, name)
			}
		}
		return behind
	}
}

var _ = Describe("An EC2 outage", func() {
	It("is one Warning Event and one error count per MachineSet, a bounded number of status writes, and heals by itself", func() {
		const n = 50
		server := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(server.Close)
		server.Unavailable.Store(true) // a fresh RequestID on every answer
		awsClusterAt(server)
		names := awsMachineSets(n)
		statusWrites := watchWrites(&operatorv1.MachineConfigurationList{}, "")
		machineSetWrites := watchWrites(&machinev1beta1.MachineSetList{}, fixtures.MachineAPINamespace)
		operatorMetrics := prometheus.NewRegistry()
		errorsBefore := errorsCounted(operatorMetrics, "MachineSet", bootimage.ReasonCloudLookupFailed)

		// Compressed time: the 3-minute grace is 2s, the 1-minute retry 1s and the failure backoff
		// at most 1s, so the outage below spans about as many retry rounds per MachineSet as five
		// minutes of the defaults (5 retries) several times over.
		// The cluster's catalogue, as the operator builds it, with the shorter backoff.
		images := kube.Clouds(k8s, server.RootCAs(), cloud.Backoff{Initial: 200 * time.Millisecond, Max: time.Second}, nil, nil)
		mgr := startOperatorWithHooks(controllers.Options{Images: images, Metrics: operatorMetrics},
			seams.Hooks{CloudErrorGrace: 2 * time.Second, CloudRetryInterval: time.Second})
		DeferCleanup(mgr.Stop)

		Eventually(condition(status.ConditionBootImageUpdateDegraded), "60s").Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring(fmt.Sprintf("%d failed: MachineSet openshift-machine-api/worker-00: CloudLookupFailed", n)))))
		Expect(condition(status.ConditionBootImageUpdateDegraded)().Message).NotTo(ContainSubstring("RequestID"))
		Eventually(func() int { return len(warningEvents(bootimage.ReasonCloudLookupFailed)) }).Should(Equal(n))
		writesAtError := statusWrites.total()
		calls := server.CallsIn("us-east-1") + server.CallsIn("us-west-2")

		// The outage goes on for two more retry flights per region, whose failures reach the
		// MachineSets' reconciles: nothing more is said or written.
		reconciles, start := machineSetReconciles(), time.Now()
		Eventually(func() int { return server.CallsIn("us-east-1") + server.CallsIn("us-west-2") }, "30s").Should(BeNumerically(">=", calls+4), "two more flights per region")
		Eventually(machineSetReconciles, "30s").Should(BeNumerically(">=", reconciles+n/2), "the retries' reconciles")
		rounds := time.Since(start)
		answered := generationBarrier()
		// A GET sees the operator's answer before the watch delivers it: count once the watch has.
		Eventually(statusWrites.observedGeneration).Should(Equal(answered), "the watch delivered the operator's answer")
		Expect(statusWrites.total()).To(Equal(writesAtError+2), "no status write while the fault stays the same (the barrier's spec write and the operator's answer aside)")
		Expect(warningEvents(bootimage.ReasonCloudLookupFailed)).To(HaveLen(n))
		for name, count := range warningEvents(bootimage.ReasonCloudLookupFailed) {
			Expect(count).To(Equal(1), "one Warning Event for "+name)
		}
		Expect(errorsCounted(operatorMetrics, "MachineSet", bootimage.ReasonCloudLookupFailed)-errorsBefore).To(BeEquivalentTo(n), "one error counted per MachineSet")
		Expect(writesAtError).To(BeNumerically("<=", n+5), "status writes bounded by the MachineSets turning Error, not by retries")
		Expect(server.CallsIn("us-east-1")+server.CallsIn("us-west-2")-calls).To(BeNumerically("<=", 2*3*(int(rounds/time.Second)+2)), "at most one flight per region per backoff interval")
		Expect(machineSetWrites.total()).To(BeZero())
		GinkgoWriter.Printf("outage: %d status writes until every MachineSet was Error, 0 after; %d DescribeImages in all\n",
			writesAtError, server.CallsIn("us-east-1")+server.CallsIn("us-west-2"))

		server.Unavailable.Store(false)
		Eventually(allUpdated(names), "30s").Should(BeEmpty())
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		for _, name := range names {
			Expect(machineSetWrites.counts()[name]).To(Equal(1), "one write of "+name)
		}
		Expect(errorsCounted(operatorMetrics, "MachineSet", bootimage.ReasonCloudLookupFailed) - errorsBefore).To(BeEquivalentTo(n))
	})
})

var _ = Describe("A throttling EC2", func() {
	It("sees at most 30 DescribeImages per region in a minute of RequestLimitExceeded from 50 MachineSets, and the wave converges once it stops", func() {
		const n = 50
		server := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(server.Close)
		server.Throttled.Store(true)
		awsClusterAt(server)
		names := awsMachineSets(n)
		machineSetWrites := watchWrites(&machinev1beta1.MachineSetList{}, fixtures.MachineAPINamespace)
		// The default timings and backoff: the minute is a real one.
		mgr := startOperator(controllers.Options{CloudRootCAs: server.RootCAs()})
		DeferCleanup(mgr.Stop)
		Eventually(func() int { return server.CallsIn("us-east-1") + server.CallsIn("us-west-2") }).Should(BeNumerically(">", 0))
		start := time.Now()

		// A minute of throttling, measured: the calls it draws per region. A window, not a barrier:
		// the claim is a rate against the fake EC2 (calls per minute under the default backoff, whose
		// schedule makes a shorter window's bound a different claim), so it takes the minute.
		Consistently(func() int { return max(server.CallsIn("us-east-1"), server.CallsIn("us-west-2")) }, "60s", "1s").Should(BeNumerically("<=", 30))
		east, west := server.CallsIn("us-east-1"), server.CallsIn("us-west-2")
		GinkgoWriter.Printf("throttled minute: %d DescribeImages in us-east-1, %d in us-west-2\n", east, west)
		Expect(machineSetWrites.total()).To(BeZero())

		server.Throttled.Store(false)
		recovered := time.Now()
		Eventually(allUpdated(names), "30s", "200ms").Should(BeEmpty())
		GinkgoWriter.Printf("converged %s after recovery (%s after the first call)\n", time.Since(recovered).Round(100*time.Millisecond), time.Since(start).Round(time.Second))
		for _, name := range names {
			Expect(machineSetWrites.counts()[name]).To(Equal(1), "one write of "+name)
		}
	})
})

// generationBarrier closes a "no status write" window: it bumps the generation of
// MachineConfiguration/cluster with a field no decision reads (one spec write, the caller's) and
// waits for the operator's status.observedGeneration of it (one status write). Sound: the
// machineconfiguration controller has one key and one worker, so the reconcile answering the bump
// ran after every reconcile an earlier trigger started (a retry round's Tracker poke is handed over
// within that round, long before the bump), and wrote what they would have.
func generationBarrier() int64 {
	GinkgoHelper()
	mc := machineConfiguration()
	level := operatorv1.Debug
	if mc.Spec.OperatorLogLevel == level {
		level = operatorv1.Trace
	}
	Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"operatorLogLevel":%q}}`, level)))).To(Succeed(), "the barrier's write")
	Eventually(func() int64 { return machineConfiguration().Status.ObservedGeneration }).Should(Equal(mc.Generation), "the operator answered the barrier")
	return mc.Generation // the patch filled mc with the server's answer
}
