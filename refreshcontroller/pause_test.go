package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
	controller "github.com/bootimage-operator/bootimage-operator/refreshcontroller"
)

var _ = Describe("Pauses for a Replace rollout the replica counts do not show yet (item 7)", Ordered, func() {
	p := testPool{name: "pauses", maxUnavailable: 1}
	nodes := []string{"pauses-0", "pauses-1"}
	const rollout = "9a9a9a9a"
	w := baseWorker()
	var mark int

	It("pauses while the MachineDeployment's observedGeneration lags its generation", func(ctx SpecContext) {
		p.create(ctx, rollout, "h1", w, nodes...)
		mark = expectStates(p.name, 0, complete)
		created := watched.Created(p.namespace())
		// A new template: the generation moves before the MachineDeployment controller looks.
		md := capiObject("MachineDeployment", p.name)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
		Expect(unstructured.SetNestedField(md.Object, map[string]any{"rolled": "yes"}, "spec", "template", "metadata", "annotations")).To(Succeed())
		Expect(k8s.Update(ctx, md)).To(Succeed())
		w.pullSecret = `{"auths":{"quay.io":{"auth":"aDI="}}}`
		p.payloadChange(ctx, rollout, "h2", w)
		mark = expectStates(p.name, mark, pausedForRollout)
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(Equal(created))
		p.machineDeploymentStatus(ctx, 2, 2)
		expectRefreshed(p, "h2", w, map[string]int{}, nodes...)
		mark = expectStates(p.name, mark, complete)
	})

	It("pauses while a Machine of the pool is being deleted", func(ctx SpecContext) {
		m := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"clusterName": "demo", "bootstrap": map[string]any{"dataSecretName": "user-data-" + p.name},
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachine", "name": "pauses-0"},
		}}}
		m.SetGroupVersionKind(controller.MachineGVK)
		m.SetNamespace(hcpNamespace)
		m.SetName("pauses-0")
		m.SetLabels(map[string]string{"cluster.x-k8s.io/deployment-name": p.name})
		m.SetFinalizers([]string{"example.com/hold"})
		Expect(k8s.Create(ctx, m)).To(Succeed())
		Expect(k8s.Delete(ctx, m)).To(Succeed())
		created := watched.Created(p.namespace())
		w.pullSecret = `{"auths":{"quay.io":{"auth":"aDM="}}}`
		p.payloadChange(ctx, rollout, "h3", w)
		mark = expectStates(p.name, mark, pausedForRollout)
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(Equal(created))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
		m.SetFinalizers(nil)
		Expect(k8s.Update(ctx, m)).To(Succeed())
		expectRefreshed(p, "h3", w, map[string]int{}, nodes...)
	})

	It("refreshes a node with no currentConfig like the others: HyperShift writes none at first boot", func(ctx SpecContext) {
		p.createFirstBootNode(ctx, "pauses-2", w)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"aDQ="}}}`
		p.payloadChange(ctx, rollout, "h4", w)
		expectRefreshed(p, "h4", w, map[string]int{}, append(nodes, "pauses-2")...)
		Eventually(func() string { return parseSnapshot(nodePool(p.name)).Complete.Status }).Should(Equal("True"))
	})

	It("pauses while a node with no currentConfig belongs to a Machine of another rollout target", func(ctx SpecContext) {
		// A Replace rollout's new node whose MachineDeployment counts are done before the
		// NodePool names the new target.
		m := p.createMachine(ctx, "pauses-3", "9f9f9f9f")
		p.createFirstBootNode(ctx, "pauses-3", w)
		linkMachine(ctx, m, "pauses-3")
		_, mark := watched.History(p.name, 0)
		created := watched.Created(p.namespace())
		w.pullSecret = `{"auths":{"quay.io":{"auth":"aDU="}}}`
		p.payloadChange(ctx, rollout, "h5", w)
		expectStates(p.name, mark, pausedForRollout)
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(Equal(created))
		// The rollout replaces it the other way: gone, as are its Machine and node.
		Expect(k8s.Delete(ctx, getNode("pauses-3"))).To(Succeed())
		Expect(k8s.Delete(ctx, m)).To(Succeed())
		expectRefreshed(p, "h5", w, map[string]int{}, append(nodes, "pauses-2")...)
	})
})

var _ = Describe("A NotReady node already on the target (item 7)", Ordered, func() {
	p := testPool{name: "notready", maxUnavailable: 1}
	nodes := []string{"notready-0", "notready-1"}
	const rollout = "9b9b9b9b"
	w := baseWorker()

	It("is done, not busy: Progressing stays False with no pod running", func(ctx SpecContext) {
		p.create(ctx, rollout, "k1", w, nodes...)
		mark := expectStates(p.name, 0, complete)
		n := getNode("notready-1")
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}}
		Expect(k8s.Status().Update(ctx, n)).To(Succeed())
		// A metadata change brings a pass that reads the NotReady node.
		p.annotate(ctx, map[string]string{"example.com/touched": "yes"})
		Consistently(func() []snapshot { h, _ := watched.History(p.name, mark); return h }, 2*time.Second).Should(BeEmpty())
		Expect(parseSnapshot(nodePool(p.name)).Progressing.Status).To(Equal("False"))
	})
})

var _ = Describe("A pool whose nodes HyperShift's first boot left (item 4)", Ordered, func() {
	p := testPool{name: "fresh", maxUnavailable: 1, firstBoot: true}
	nodes := []string{"fresh-0", "fresh-1"}
	const rollout = "9d9d9d9d"
	w := baseWorker()

	It("is adopted though its nodes carry no currentConfig: nothing moves", func(ctx SpecContext) {
		p.create(ctx, rollout, "e1", w, nodes...)
		expectStates(p.name, 0, complete)
		Expect(recordsOf(nodes...)).To(Equal([]string{"e1", "e1"}))
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(BeZero())
	})

	It("refreshes them in place", func(ctx SpecContext) {
		w.sshKey = "ssh-ed25519 EEEE core@e2"
		p.payloadChange(ctx, rollout, "e2", w)
		expectRefreshed(p, "e2", w, map[string]int{}, nodes...)
	})
})

var _ = Describe("Nodes that join a refreshed pool (item 4)", Ordered, func() {
	p := testPool{name: "joins", maxUnavailable: 1}
	const rollout = "9c9c9c9c"
	w := baseWorker()

	It("counts a node whose first boot recorded the current payload hash as refreshed: no daemon pod", func(ctx SpecContext) {
		p.create(ctx, rollout, "j1", w, "joins-0")
		expectStates(p.name, 0, complete)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"ajI="}}}`
		p.payloadChange(ctx, rollout, "j2", w)
		expectRefreshed(p, "j2", w, map[string]int{}, "joins-0")
		created := watched.Created(p.namespace())
		// The served Ignition's node-annotations.json carries the payload hash (docs/hypershift.md).
		p.createNode(ctx, "joins-1", rollout, w)
		n := getNode("joins-1")
		base := n.DeepCopy()
		n.Annotations[pool.CurrentRefreshConfigAnnotation] = "j2"
		Expect(k8s.Patch(ctx, n, client.MergeFrom(base))).To(Succeed())
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(Equal(created))
		Expect(parseSnapshot(nodePool(p.name)).Complete.Status).To(Equal("True"))
		Expect(daemon.Verdicts("joins-1")).To(BeEmpty())
	})

	It("refreshes a node that joins without the record, and its daemon finds nothing to change", func(ctx SpecContext) {
		p.createNode(ctx, "joins-2", rollout, w)
		Eventually(func(g Gomega) {
			g.Expect(recordsOf("joins-0", "joins-1", "joins-2")).To(Equal([]string{"j2", "j2", "j2"}))
			g.Expect(podNames(p)).To(BeEmpty())
			g.Expect(parseSnapshot(nodePool(p.name)).Complete.Status).To(Equal("True"))
		}).Should(Succeed())
		Expect(daemon.Verdicts("joins-2")).To(Equal([]string{"NoChange"}))
		Expect(daemon.Reboots("joins-2")).To(BeZero())
	})

	It("adopts a node whose Machine was created after the payload was in place: no daemon pod", func(ctx SpecContext) {
		since, err := time.Parse(time.RFC3339, upgradeConfigMap(p).Annotations[controller.PayloadInPlaceAnnotation])
		Expect(err).NotTo(HaveOccurred(), "the ConfigMap says when the payload of its hash was in place")
		waitForServerClock(ctx, since.Add(clockSkew))
		created := watched.Created(p.namespace())
		m := p.createMachine(ctx, "joins-3", rollout)
		p.createFirstBootNode(ctx, "joins-3", w)
		linkMachine(ctx, m, "joins-3")
		Eventually(func() []string { return recordsOf("joins-3") }).Should(Equal([]string{"j2"}))
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(Equal(created))
		Expect(daemon.Verdicts("joins-3")).To(BeEmpty(), "no daemon ran")
		Expect(parseSnapshot(nodePool(p.name)).Complete.Status).To(Equal("True"))
	})

	It("refreshes a node whose Machine was created before the payload was in place, though its node registers after", func(ctx SpecContext) {
		m := p.createMachine(ctx, "joins-4", rollout)
		booted := w // the instance fetched its Ignition now: payload j2
		w.pullSecret = `{"auths":{"quay.io":{"auth":"ajM="}}}`
		p.payloadChange(ctx, rollout, "j3", w)
		expectRefreshed(p, "j3", w, map[string]int{}, "joins-0", "joins-1", "joins-2", "joins-3")
		// The node registers well after the payload moved: only its Machine's age tells.
		since, err := time.Parse(time.RFC3339, upgradeConfigMap(p).Annotations[controller.PayloadInPlaceAnnotation])
		Expect(err).NotTo(HaveOccurred())
		waitForServerClock(ctx, since.Add(clockSkew))
		p.createFirstBootNode(ctx, "joins-4", booted)
		linkMachine(ctx, m, "joins-4")
		expectRefreshed(p, "j3", w, map[string]int{}, "joins-4")
	})
})

// clockSkew is the suite reconciler's ClockSkew.
const clockSkew = time.Second

// waitForServerClock waits until objects the API server creates are stamped after t.
func waitForServerClock(ctx context.Context, t time.Time) {
	Eventually(func() time.Time {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hcpNamespace, GenerateName: "clock-"}}
		Expect(k8s.Create(ctx, probe)).To(Succeed())
		Expect(k8s.Delete(ctx, probe)).To(Succeed())
		return probe.CreationTimestamp.Time
	}).WithPolling(200 * time.Millisecond).Should(BeTemporally(">", t))
}
