package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
	controller "github.com/bootimage-operator/bootimage-operator/refreshcontroller"
)

// testPool is a NodePool of the walk-through, its nodes and its Cluster API object: a
// MachineDeployment for a Replace pool, a MachineSet for an InPlace one (as HyperShift creates).
type testPool struct {
	name           string
	inPlace        bool
	maxUnavailable int64
	// firstBoot nodes carry no machineconfiguration annotations, as HyperShift's first boot
	// leaves them; otherwise they carry a daemon run's on the rollout target.
	firstBoot bool
}

func (p testPool) namespace() string { ns, _ := hypershift.UpgradeNames(p.name); return ns }

func nodePool(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(controller.NodePoolGVK)
	Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: hcpNamespace, Name: name}, u)).To(Succeed())
	return u
}

func capiObject(gvk string, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if gvk == "MachineDeployment" {
		u.SetGroupVersionKind(controller.MachineDeploymentGVK)
	} else {
		u.SetGroupVersionKind(controller.MachineSetGVK)
	}
	u.SetNamespace(hcpNamespace)
	u.SetName(name)
	return u
}

// create makes the NodePool, its token Secret, its MachineDeployment or MachineSet and its nodes,
// built with rollout target rollout and config w (as the ignition server serves it).
func (p testPool) create(ctx context.Context, rollout, payloadHash string, w worker, nodes ...string) {
	watched.limit(p.namespace(), int(p.maxUnavailable))
	// The pool exists before the controller sees it: its nodes first.
	for _, n := range nodes {
		if p.firstBoot {
			p.createFirstBootNode(ctx, n, w)
			continue
		}
		p.createNode(ctx, n, rollout, w)
	}
	p.writeToken(ctx, rollout, payloadHash, w)
	np := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"management": map[string]any{}}}}
	np.SetGroupVersionKind(controller.NodePoolGVK)
	np.SetNamespace(hcpNamespace)
	np.SetName(p.name)
	np.SetAnnotations(map[string]string{controller.NodePoolCurrentConfigAnnotation: rollout, hypershift.NodePoolTargetRefreshConfigAnnotation: payloadHash})
	if p.inPlace {
		Expect(unstructured.SetNestedField(np.Object, "InPlace", "spec", "management", "upgradeType")).To(Succeed())
		Expect(unstructured.SetNestedField(np.Object, p.maxUnavailable, "spec", "management", "inPlace", "maxUnavailable")).To(Succeed())
	} else {
		Expect(unstructured.SetNestedField(np.Object, "Replace", "spec", "management", "upgradeType")).To(Succeed())
		Expect(unstructured.SetNestedField(np.Object, p.maxUnavailable, "spec", "management", "replace", "rollingUpdate", "maxUnavailable")).To(Succeed())
	}
	Expect(k8s.Create(ctx, np)).To(Succeed())

	kind := "MachineDeployment"
	if p.inPlace {
		kind = "MachineSet"
	}
	o := capiObject(kind, p.name)
	o.Object["spec"] = map[string]any{
		"clusterName": "demo", "replicas": int64(len(nodes)),
		"selector": map[string]any{"matchLabels": map[string]any{"pool": p.name}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"pool": p.name}},
			"spec": map[string]any{
				"clusterName": "demo", "bootstrap": map[string]any{"dataSecretName": "user-data-" + p.name},
				"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachineTemplate", "name": p.name},
			},
		},
	}
	if p.inPlace {
		o.SetAnnotations(map[string]string{hypershift.MachineSetTargetConfigVersionAnnotation: rollout, hypershift.MachineSetCurrentConfigVersionAnnotation: rollout})
	}
	Expect(k8s.Create(ctx, o)).To(Succeed())
	if !p.inPlace {
		p.machineDeploymentStatus(ctx, int64(len(nodes)), int64(len(nodes)))
	}
}

// createNode makes a node booted with w: the daemon's current config, and the annotations of a
// daemon run on the rollout target (an in-place upgrade's).
func (p testPool) createNode(ctx context.Context, name, rollout string, w worker) {
	p.createNodeWith(ctx, name, w, map[string]string{pool.CurrentConfigAnnotation: rollout, pool.DesiredConfigAnnotation: rollout, pool.StateAnnotation: pool.StateDone})
}

// createFirstBootNode makes a node as HyperShift's first boot leaves it: booted with w, and no
// machineconfiguration annotations (only a daemon writes them).
func (p testPool) createFirstBootNode(ctx context.Context, name string, w worker) {
	p.createNodeWith(ctx, name, w, nil)
}

func (p testPool) createNodeWith(ctx context.Context, name string, w worker, annotations map[string]string) {
	Expect(daemon.Seed(name, w.served())).To(Succeed())
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{controller.NodePoolLabel: p.name}, Annotations: annotations}}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	Expect(k8s.Status().Update(ctx, n)).To(Succeed())
}

// createMachine makes a Machine of the pool's MachineDeployment built with rollout target
// rollout (HyperShift's user-data-<pool>-<target> bootstrap Secret), with no node yet.
func (p testPool) createMachine(ctx context.Context, name, rollout string) *unstructured.Unstructured {
	m := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"clusterName": "demo", "bootstrap": map[string]any{"dataSecretName": "user-data-" + p.name + "-" + rollout},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachine", "name": name},
	}}}
	m.SetGroupVersionKind(controller.MachineGVK)
	m.SetNamespace(hcpNamespace)
	m.SetName(name)
	m.SetLabels(map[string]string{"cluster.x-k8s.io/deployment-name": p.name})
	Expect(k8s.Create(ctx, m)).To(Succeed())
	return m
}

// linkMachine sets a Machine's nodeRef, as Cluster API does once its node registers.
func linkMachine(ctx context.Context, m *unstructured.Unstructured, node string) {
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	Expect(unstructured.SetNestedField(m.Object, node, "status", "nodeRef", "name")).To(Succeed())
	Expect(k8s.Status().Update(ctx, m)).To(Succeed())
}

// writeToken writes the token Secret of a rollout target with w's served payload and the payload
// hash it was generated for, as HyperShift must keep it current under a pinned target
// (docs/hypershift.md).
func (p testPool) writeToken(ctx context.Context, rollout, payloadHash string, w worker) {
	p.writeTokenData(ctx, rollout, payloadHash, w.encoded())
}

func (p testPool) writeTokenData(ctx context.Context, rollout, payloadHash string, payload []byte) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hcpNamespace, Name: controller.TokenSecretName(p.name, rollout)}}
	err := k8s.Get(ctx, client.ObjectKeyFromObject(s), s)
	if apierrors.IsNotFound(err) {
		s.Data = map[string][]byte{hypershift.TokenSecretPayloadKey: payload, controller.TokenSecretRefreshConfigKey: []byte(payloadHash)}
		Expect(k8s.Create(ctx, s)).To(Succeed())
		return
	}
	Expect(err).NotTo(HaveOccurred())
	s.Data[hypershift.TokenSecretPayloadKey] = payload
	s.Data[controller.TokenSecretRefreshConfigKey] = []byte(payloadHash)
	Expect(k8s.Update(ctx, s)).To(Succeed())
}

// annotate merge-patches the NodePool's annotations, as the NodePool controller sets them.
func (p testPool) annotate(ctx context.Context, annotations map[string]string) {
	np := nodePool(p.name)
	base := np.DeepCopy()
	a := np.GetAnnotations()
	for k, v := range annotations {
		a[k] = v
	}
	np.SetAnnotations(a)
	Expect(k8s.Patch(ctx, np, client.MergeFrom(base))).To(Succeed())
}

// payloadChange is the NodePool controller on a payload-only change: the token Secret of the
// pinned rollout target carries the new payload, and the payload hash moves.
func (p testPool) payloadChange(ctx context.Context, rollout, payloadHash string, w worker) {
	p.writeToken(ctx, rollout, payloadHash, w)
	p.annotate(ctx, map[string]string{hypershift.NodePoolTargetRefreshConfigAnnotation: payloadHash})
}

func (p testPool) machineDeploymentStatus(ctx context.Context, replicas, upToDate int64) {
	md := capiObject("MachineDeployment", p.name)
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
	Expect(unstructured.SetNestedField(md.Object, replicas, "status", "replicas")).To(Succeed())
	Expect(unstructured.SetNestedField(md.Object, upToDate, "status", "upToDateReplicas")).To(Succeed())
	Expect(unstructured.SetNestedField(md.Object, md.GetGeneration(), "status", "observedGeneration")).To(Succeed())
	Expect(k8s.Status().Update(ctx, md)).To(Succeed())
}

func (p testPool) machineSetAnnotations(ctx context.Context, set map[string]string, remove ...string) {
	ms := capiObject("MachineSet", p.name)
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ms), ms)).To(Succeed())
	a := ms.GetAnnotations()
	for k, v := range set {
		a[k] = v
	}
	for _, k := range remove {
		delete(a, k)
	}
	ms.SetAnnotations(a)
	Expect(k8s.Update(ctx, ms)).To(Succeed())
}

func parseSnapshot(u *unstructured.Unstructured) snapshot {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var s snapshot
	for _, c := range raw {
		m, _ := c.(map[string]any)
		cond := condition{Status: fmt.Sprint(m["status"]), Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"])}
		switch m["type"] {
		case pool.ConditionProgressing:
			s.Progressing = cond
		case pool.ConditionComplete:
			s.Complete = cond
		case pool.ConditionDegraded:
			s.Degraded = cond
		}
	}
	return s
}

// A state of the conditions the enhancement names.
type state struct {
	name  string
	holds func(snapshot) bool
}

var refreshingMessage = regexp.MustCompile(`^Refreshing [1-9][0-9]*/3 nodes$`)

var (
	// Transition 1 and 2: a new payload hash with the rollout hash unchanged; the message counts nodes.
	refreshing = state{"Complete False, Progressing True counting nodes", func(s snapshot) bool {
		return s.Complete.Status == "False" && s.Progressing.Status == "True" && refreshingMessage.MatchString(s.Progressing.Message)
	}}
	// Transition 3, and 5 after a Replace rollout: all done.
	complete = state{"Progressing False, Complete True, Degraded False", func(s snapshot) bool {
		return s.Progressing.Status == "False" && s.Complete.Status == "True" && s.Degraded.Status == "False"
	}}
	pausedForRollout = state{"Progressing False PausedForRollout, Complete False", func(s snapshot) bool {
		return s.Progressing.Status == "False" && s.Progressing.Reason == "PausedForRollout" && s.Complete.Status == "False"
	}}
	pausedForUpgrade = state{"Progressing False PausedForUpgrade, Complete False", func(s snapshot) bool {
		return s.Progressing.Status == "False" && s.Progressing.Reason == "PausedForUpgrade" && s.Complete.Status == "False"
	}}
)

// Transition 4: a failure, naming the node.
func degradedNaming(node string) state {
	return state{"Degraded True naming " + node, func(s snapshot) bool {
		return s.Degraded.Status == "True" && strings.Contains(s.Degraded.Message, node+":")
	}}
}

// expectStates waits until the NodePool's condition history from index from holds the states
// in order, and returns the history's length then.
func expectStates(poolName string, from int, states ...state) int {
	var next int
	Eventually(func(g Gomega) {
		var h []snapshot
		h, next = watched.History(poolName, from)
		i := 0
		for _, s := range h {
			if i < len(states) && states[i].holds(s) {
				i++
			}
		}
		g.Expect(i).To(Equal(len(states)), "states %v not all seen in order in %v", names(states), h)
	}).Should(Succeed())
	return next
}

func names(states []state) []string {
	var out []string
	for _, s := range states {
		out = append(out, s.name)
	}
	return out
}

func getNode(name string) *corev1.Node {
	n := &corev1.Node{}
	Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, n)).To(Succeed())
	return n
}

// expectRefreshed waits until every node runs payloadHash with w's files on disk and no daemon
// pod is left, and checks no node was drained, cordoned or rebooted since rebootsBefore.
func expectRefreshed(p testPool, payloadHash string, w worker, rebootsBefore map[string]int, nodes ...string) {
	Eventually(func(g Gomega) {
		for _, name := range nodes {
			n := &corev1.Node{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, n)).To(Succeed())
			g.Expect(n.Annotations).To(HaveKeyWithValue(pool.CurrentRefreshConfigAnnotation, payloadHash), name)
			g.Expect(n.Annotations[pool.DesiredDrainAnnotation]).To(Equal(n.Annotations[pool.LastAppliedDrainAnnotation]), name)
			g.Expect(os.ReadFile(filepath.Join(daemon.Root, name, pullSecretFile))).To(BeEquivalentTo(w.pullSecret), name)
			g.Expect(os.ReadFile(filepath.Join(daemon.Root, name, registriesFile))).To(BeEquivalentTo(w.registries), name)
		}
		g.Expect(podNames(p)).To(BeEmpty())
	}).Should(Succeed())
	for _, name := range nodes {
		n := getNode(name)
		Expect(n.Spec.Unschedulable).To(BeFalse(), "%s cordoned", name)
		Expect(n.Annotations[pool.DesiredDrainAnnotation]).NotTo(HavePrefix("drain-"), "%s drained", name)
		Expect(daemon.Reboots(name)).To(Equal(rebootsBefore[name]), "%s rebooted", name)
		Expect(daemon.Drains(name)).To(BeZero(), "%s drained", name)
		v := daemon.Verdicts(name)
		Expect(v).NotTo(BeEmpty(), name)
		Expect(v[len(v)-1]).To(Equal(hypershift.ReasonRefreshable), "the daemon's own decision on %s", name)
	}
}

// podNames lists the daemon pods of a pool with their phases.
func podNames(p testPool) []string {
	pods := &corev1.PodList{}
	Expect(k8s.List(context.Background(), pods, client.InNamespace(p.namespace()))).To(Succeed())
	var out []string
	for _, pod := range pods.Items {
		out = append(out, pod.Name+"="+string(pod.Status.Phase))
	}
	return out
}

func reboots(nodes ...string) map[string]int {
	m := map[string]int{}
	for _, n := range nodes {
		m[n] = daemon.Reboots(n)
	}
	return m
}

func upgradeConfigMap(p testPool) *corev1.ConfigMap {
	ns, name := hypershift.UpgradeNames(p.name)
	cm := &corev1.ConfigMap{}
	Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)).To(Succeed())
	return cm
}

var _ = AfterEach(func() {
	Expect(watched.Violations()).To(BeEmpty(), "invariants broken")
	Expect(noisy.Take()).To(BeEmpty(), "conflicts are requeued quietly, and no result comes with an error")
})

var _ = Describe("The refresh controller on a Replace NodePool of three nodes", Ordered, func() {
	p := testPool{name: "workers", maxUnavailable: 2}
	nodes := []string{"workers-0", "workers-1", "workers-2"}
	const rollout = "0a0a0a0a"
	w := baseWorker()
	var mark int

	It("adopts the pool: the served payload is what the nodes run, and nothing moves", func(ctx SpecContext) {
		p.create(ctx, rollout, "p1", w, nodes...)
		Eventually(func(g Gomega) {
			for _, n := range nodes {
				g.Expect(getNode(n).Annotations).To(HaveKeyWithValue(pool.CurrentRefreshConfigAnnotation, "p1"))
			}
		}).Should(Succeed())
		cm := upgradeConfigMap(p)
		Expect(cm.Data).To(HaveKeyWithValue(hypershift.KeyHash, pool.RefreshConfigValue(rollout, "p1")))
		Expect(cm.Data).To(HaveKey(hypershift.KeyNoRebootPaths))
		mark = expectStates(p.name, 0, complete)
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(BeZero())
		for _, n := range nodes {
			Expect(getNode(n).Annotations).To(HaveKeyWithValue(pool.DesiredConfigAnnotation, rollout), "adoption asks the daemon for nothing")
		}
	})

	It("refreshes a pull-secret rotation in place: no drain, no reboot, Complete True", func(ctx SpecContext) {
		before := reboots(nodes...)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"djI="}}}`
		p.payloadChange(ctx, rollout, "p2", w)
		expectRefreshed(p, "p2", w, before, nodes...)
		mark = expectStates(p.name, mark, refreshing, complete)
		Expect(watched.Peak(p.namespace())).To(BeNumerically("<=", 2))
	})

	It("refreshes an ssh-key rotation in place", func(ctx SpecContext) {
		before := reboots(nodes...)
		w.sshKey = "ssh-ed25519 BBBB core@v2"
		p.payloadChange(ctx, rollout, "p3", w)
		expectRefreshed(p, "p3", w, before, nodes...)
		mark = expectStates(p.name, mark, refreshing, complete)
	})

	It("refreshes a safe image mirror change (a digest-only mirror)", func(ctx SpecContext) {
		before := reboots(nodes...)
		w.registries = baseRegistries + safeMirror
		p.payloadChange(ctx, rollout, "p4", w)
		expectRefreshed(p, "p4", w, before, nodes...)
		mark = expectStates(p.name, mark, refreshing, complete)
	})

	It("pauses a refresh that arrives during a MachineDeployment rollout until the rollout ends", func(ctx SpecContext) {
		before := reboots(nodes...)
		created := watched.Created(p.namespace())
		p.machineDeploymentStatus(ctx, 3, 2)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"djM="}}}`
		p.payloadChange(ctx, rollout, "p5", w)
		mark = expectStates(p.name, mark, pausedForRollout)
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(Equal(created), "no daemon pod during the rollout")
		p.machineDeploymentStatus(ctx, 3, 3)
		expectRefreshed(p, "p5", w, before, nodes...)
		mark = expectStates(p.name, mark, refreshing, complete)
	})

	It("reports a node whose daemon fails, by name, while the others finish", func(ctx SpecContext) {
		daemon.SetFail("workers-1", "writing /var/lib/kubelet/config.json: read-only file system")
		w.sshKey = "ssh-ed25519 CCCC core@v3"
		p.payloadChange(ctx, rollout, "p6", w)
		mark = expectStates(p.name, mark, refreshing, degradedNaming("workers-1"))
		Eventually(func(g Gomega) {
			for _, n := range []string{"workers-0", "workers-2"} {
				g.Expect(getNode(n).Annotations).To(HaveKeyWithValue(pool.CurrentRefreshConfigAnnotation, "p6"), n)
			}
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Degraded.Message).To(ContainSubstring("read-only file system"))
			g.Expect(s.Complete.Status).To(Equal("False"))
			g.Expect(s.Progressing.Message).To(Equal("Refreshing 1/3 nodes"))
		}).Should(Succeed())
		Expect(watched.Peak(p.namespace())).To(Equal(2), "two nodes at once, as maxUnavailable allows")
		n := getNode("workers-1")
		Expect(n.Annotations).To(HaveKeyWithValue(pool.StateAnnotation, pool.StateDegraded))
		Expect(n.Annotations).To(HaveKeyWithValue(pool.CurrentRefreshConfigAnnotation, "p5"))
	})

	It("reports an unsafe image mirror change as not a refresh and leaves it to the next rollout", func(ctx SpecContext) {
		created := watched.Created(p.namespace())
		unsafe := w
		unsafe.registries = w.registries + unsafeMirror
		p.payloadChange(ctx, rollout, "p7", unsafe)
		w = unsafe
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Complete.Reason).To(Equal(controller.ReasonNotARefresh))
			g.Expect(s.Complete.Message).To(ContainSubstring(hypershift.ReasonNeedsDrain))
			g.Expect(s.Progressing.Status).To(Equal("False"))
			g.Expect(s.Degraded.Message).To(ContainSubstring("workers-1:"), "the failed node is still reported")
		}).Should(Succeed())
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(Equal(created))
		Expect(upgradeConfigMap(p).Data).To(HaveKeyWithValue(hypershift.KeyHash, pool.RefreshConfigValue(rollout, "p6")), "not delivered")
	})

	It("leaves a kernel argument change to the rollout, then adopts the new nodes: Complete True, Progressing and Degraded False", func(ctx SpecContext) {
		const next = "0b0b0b0b"
		created := watched.Created(p.namespace())
		w.kernelArguments = append(w.kernelArguments, "nosmt")
		// The NodePool controller: the rollout hash moved (it carries the unsafe mirror too); the
		// MachineDeployment rolls.
		p.writeToken(ctx, next, "p7", w)
		p.machineDeploymentStatus(ctx, 3, 0)
		mark = expectStates(p.name, mark, pausedForRollout)
		// Cluster API replaces the machines; the pod GC removes the daemon pod of a deleted node.
		newNodes := []string{"workers-3", "workers-4", "workers-5"}
		for i, n := range newNodes {
			p.createNode(ctx, n, next, w)
			Expect(k8s.Delete(ctx, getNode(nodes[i]))).To(Succeed())
			p.machineDeploymentStatus(ctx, 3, int64(i+1))
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace(), Name: hypershift.DaemonPodName("workers-1")}}))).To(Succeed())
		p.annotate(ctx, map[string]string{controller.NodePoolCurrentConfigAnnotation: next})
		mark = expectStates(p.name, mark, complete)
		Eventually(func(g Gomega) {
			for _, n := range newNodes {
				g.Expect(getNode(n).Annotations).To(HaveKeyWithValue(pool.CurrentRefreshConfigAnnotation, "p7"), n)
			}
		}).Should(Succeed())
		Expect(upgradeConfigMap(p).Data).To(HaveKeyWithValue(hypershift.KeyHash, pool.RefreshConfigValue(next, "p7")))
		Expect(watched.Created(p.namespace())).To(Equal(created), "the controller ran no daemon for the rollout")
		for _, n := range newNodes {
			Expect(daemon.Verdicts(n)).To(BeEmpty())
		}
	})
})

var _ = Describe("The refresh controller on an InPlace NodePool of three nodes", Ordered, func() {
	p := testPool{name: "inplace", inPlace: true, maxUnavailable: 1}
	nodes := []string{"inplace-0", "inplace-1", "inplace-2"}
	const rollout, upgraded = "1a1a1a1a", "1b1b1b1b"
	w := baseWorker()
	var mark int

	It("adopts the pool", func(ctx SpecContext) {
		p.create(ctx, rollout, "q1", w, nodes...)
		mark = expectStates(p.name, 0, complete)
	})

	It("defers a refresh while an in-place upgrade runs, then re-evaluates it against what the upgrade delivered", func(ctx SpecContext) {
		// The upgrade (a kernel argument) starts from the payload of its time.
		u := w
		u.kernelArguments = append(append([]string(nil), w.kernelArguments...), "nosmt")
		p.writeToken(ctx, upgraded, "q1", u)
		p.machineSetAnnotations(ctx, map[string]string{hypershift.MachineSetTargetConfigVersionAnnotation: upgraded, hypershift.MachineSetUpgradeInProgressTrueAnnotation: "upgrading"})
		// A pull-secret rotation arrives during the upgrade.
		w.pullSecret = `{"auths":{"quay.io":{"auth":"cTI="}}}`
		p.payloadChange(ctx, rollout, "q2", w)
		mark = expectStates(p.name, mark, pausedForUpgrade)
		created := watched.Created(p.namespace())

		// The in-place upgrader: its ConfigMap Data is exactly {config, hash}; one node at a time.
		cm := upgradeConfigMap(p)
		cm.Data = map[string]string{hypershift.KeyConfig: string(u.encoded()), hypershift.KeyHash: upgraded}
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		for _, name := range nodes {
			n := getNode(name)
			base := n.DeepCopy()
			n.Annotations[pool.DesiredConfigAnnotation] = upgraded
			Expect(k8s.Patch(ctx, n, client.MergeFrom(base))).To(Succeed())
			pod := controller.DaemonPod(p.name, name, "quay.io/example/machine-config-daemon:test")
			Expect(k8s.Create(ctx, pod)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
				g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded))
			}).Should(Succeed())
			n = getNode(name)
			Expect(n.Annotations).To(HaveKeyWithValue(pool.CurrentConfigAnnotation, upgraded))
			base = n.DeepCopy()
			n.Annotations[pool.LastAppliedDrainAnnotation] = n.Annotations[pool.DesiredDrainAnnotation]
			Expect(k8s.Patch(ctx, n, client.MergeFrom(base))).To(Succeed())
			Expect(k8s.Delete(ctx, pod)).To(Succeed())
		}
		Expect(watched.Created(p.namespace())).To(Equal(created+len(nodes)), "the upgrader's pods only")
		Expect(upgradeConfigMap(p).Data).To(Equal(cm.Data), "the controller wrote nothing during the upgrade")
		for _, name := range nodes {
			Expect(daemon.Reboots(name)).To(Equal(1), "the upgrade reboots %s", name)
		}

		// The upgrade ends: the MachineSet first, then the NodePool; the token Secret of the new
		// target is kept current with the rotated pull secret.
		w.kernelArguments = u.kernelArguments
		p.writeToken(ctx, upgraded, "q2", w)
		p.machineSetAnnotations(ctx, map[string]string{hypershift.MachineSetCurrentConfigVersionAnnotation: upgraded}, hypershift.MachineSetUpgradeInProgressTrueAnnotation)
		p.annotate(ctx, map[string]string{controller.NodePoolCurrentConfigAnnotation: upgraded})
		expectRefreshed(p, "q2", w, reboots(nodes...), nodes...)
		mark = expectStates(p.name, mark, refreshing, complete)
		Expect(upgradeConfigMap(p).Data).To(HaveKeyWithValue(hypershift.KeyHash, pool.RefreshConfigValue(upgraded, "q2")))
	})
})
