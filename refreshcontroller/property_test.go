package controller_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
)

// A random walk: payloads (some whose hash moves before the payload lands), nodes joining and
// leaving, daemons failing and healing, Replace rollouts starting and ending, in any order and
// without waiting for the controller. The recorder checks on every pod event that no node runs
// two daemon pods and no more than maxUnavailable are busy; at the end, with failures healed,
// rollouts over and one last payload, every node runs the last payload: its record, its files,
// and no reboot or drain on the way.
var _ = Describe("Random sequences of payloads, nodes, failures and rollouts (property)", func() {
	for run := range 3 {
		It(fmt.Sprintf("keeps the invariants and ends every node on the last payload (run %d)", run), func(ctx SpecContext) {
			seed := GinkgoRandomSeed() + int64(run)
			By(fmt.Sprintf("seed %d", seed))
			walk(ctx, rand.New(rand.NewPCG(uint64(seed), 46)), run)
		})
	}
})

func walk(ctx context.Context, rng *rand.Rand, run int) {
	p := testPool{name: fmt.Sprintf("prop%d", run), maxUnavailable: 2}
	rollout := fmt.Sprintf("c%07d", run)
	w := baseWorker()
	nodes := map[string]bool{}
	var names []string
	next := 0
	newNode := func() string {
		n := fmt.Sprintf("%s-%d", p.name, next)
		next++
		nodes[n] = true
		return n
	}
	for range 3 {
		names = append(names, newNode())
	}
	p.create(ctx, rollout, "x0", w, names...)
	expectStates(p.name, 0, complete)
	payload, failing, rolling := 0, map[string]bool{}, false
	alive := func() []string {
		var out []string
		for n := range nodes {
			out = append(out, n)
		}
		return out
	}
	newPayload := func() {
		payload++
		hash := fmt.Sprintf("x%d", payload)
		w.pullSecret = fmt.Sprintf(`{"auths":{"quay.io":{"auth":"%s"}}}`, hash)
		if rng.IntN(3) == 0 {
			// The hash moves before the ignition server writes the payload.
			p.annotate(ctx, map[string]string{hypershift.NodePoolTargetRefreshConfigAnnotation: hash})
			p.writeToken(ctx, rollout, hash, w)
			return
		}
		p.payloadChange(ctx, rollout, hash, w)
	}
	for range 12 {
		switch step := rng.IntN(6); {
		case step <= 1:
			newPayload()
		case step == 2 && len(nodes) < 5:
			// Built from the token Secret as it is now.
			p.createNode(ctx, newNode(), rollout, w)
		case step == 2:
			n := alive()[rng.IntN(len(nodes))]
			delete(nodes, n)
			delete(failing, n)
			Expect(k8s.Delete(ctx, getNode(n))).To(Succeed())
			// The pod garbage collector removes a deleted node's pods.
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace(), Name: hypershift.DaemonPodName(n)}}))).To(Succeed())
		case step == 3:
			n := alive()[rng.IntN(len(nodes))]
			failing[n] = !failing[n]
			daemon.SetFail(n, map[bool]string{true: "writing files: input/output error"}[failing[n]])
		case step == 4:
			rolling = !rolling
			if rolling {
				p.machineDeploymentStatus(ctx, 3, 2)
			} else {
				p.machineDeploymentStatus(ctx, 3, 3)
			}
		default:
			// Let the controller catch up with the target, unless it is paused.
			if !rolling {
				target := pool.RefreshConfigValue(rollout, fmt.Sprintf("x%d", payload))
				Eventually(func() string { return upgradeConfigMap(p).Data[hypershift.KeyHash] }).Should(Equal(target))
			}
		}
	}
	for n := range failing {
		daemon.SetFail(n, "")
	}
	if rolling {
		p.machineDeploymentStatus(ctx, 3, 3)
	}
	// Failed nodes are retried with a new target only.
	newPayload()
	last := fmt.Sprintf("x%d", payload)
	Eventually(func(g Gomega) {
		for n := range nodes {
			node := &corev1.Node{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: n}, node)).To(Succeed())
			g.Expect(node.Annotations).To(HaveKeyWithValue(pool.CurrentRefreshConfigAnnotation, last), n)
			g.Expect(node.Annotations[pool.DesiredDrainAnnotation]).To(Equal(node.Annotations[pool.LastAppliedDrainAnnotation]), n)
		}
		s := parseSnapshot(nodePool(p.name))
		g.Expect(s.Complete.Status).To(Equal("True"), "%s", s)
		g.Expect(s.Degraded.Status).To(Equal("False"), "%s", s)
		g.Expect(podNames(p)).To(BeEmpty())
	}).Should(Succeed())
	for n := range nodes {
		// The record names what the node's files hold.
		Expect(os.ReadFile(filepath.Join(daemon.Root, n, pullSecretFile))).To(BeEquivalentTo(w.pullSecret), n)
		Expect(daemon.Reboots(n)).To(BeZero(), n)
		Expect(daemon.Drains(n)).To(BeZero(), n)
	}
}
