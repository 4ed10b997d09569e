package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
)

// conditionsOf returns a NodePool's conditions by type, as the API server holds them.
func conditionsOf(name string) map[string]map[string]any {
	raw, _, _ := unstructured.NestedSlice(nodePool(name).Object, "status", "conditions")
	out := map[string]map[string]any{}
	for _, c := range raw {
		m, _ := c.(map[string]any)
		out[m["type"].(string)] = m
	}
	return out
}

// setStatusConditions writes a NodePool's status conditions as its own controller would.
func setStatusConditions(ctx context.Context, name string, conditions ...map[string]any) {
	np := nodePool(name)
	list := make([]any, 0, len(conditions))
	for _, c := range conditions {
		list = append(list, c)
	}
	Expect(unstructured.SetNestedSlice(np.Object, list, "status", "conditions")).To(Succeed())
	Expect(k8s.Status().Update(ctx, np)).To(Succeed())
}

var _ = Describe("The NodePool conditions the refresh controller writes", Ordered, func() {
	p := testPool{name: "owned", maxUnavailable: 1}
	nodes := []string{"owned-0", "owned-1"}
	const rollout = "2a2a2a2a"
	// Long before the spec runs: a rewritten transition time cannot match it by chance.
	const before = "2026-01-02T03:04:05Z"
	w := baseWorker()

	It("keeps a condition it does not own, present before its first pass, and the transition time of one whose status stays", func(ctx SpecContext) {
		// The NodePool exists, with a Ready condition of the NodePool controller and a
		// ConfigRefreshComplete of an earlier run, before the controller knows a payload hash.
		p.create(ctx, rollout, "", w, nodes...)
		ready := map[string]any{"type": "Ready", "status": "True", "reason": "AsExpected", "message": "All is well", "lastTransitionTime": before}
		earlier := map[string]any{"type": pool.ConditionComplete, "status": "True", "reason": "AsExpected", "message": "2/2 nodes refreshed", "lastTransitionTime": before}
		setStatusConditions(ctx, p.name, ready, earlier)
		p.writeToken(ctx, rollout, "r1", w)
		p.annotate(ctx, map[string]string{hypershift.NodePoolTargetRefreshConfigAnnotation: "r1"})

		Eventually(func(g Gomega) {
			c := conditionsOf(p.name)
			g.Expect(c).To(HaveKey(pool.ConditionProgressing))
			g.Expect(c).To(HaveKey(pool.ConditionDegraded))
			g.Expect(c).To(HaveKeyWithValue("Ready", HaveKeyWithValue("lastTransitionTime", before)))
			g.Expect(c["Ready"]).To(HaveKeyWithValue("message", "All is well"))
			g.Expect(c).To(HaveKeyWithValue(pool.ConditionComplete, And(HaveKeyWithValue("status", "True"), HaveKeyWithValue("lastTransitionTime", before))))
		}).Should(Succeed())
	})

	It("leaves every condition as it was on a change of the NodePool's metadata only", func(ctx SpecContext) {
		want := conditionsOf(p.name)
		np := nodePool(p.name)
		base := np.DeepCopy()
		np.SetLabels(map[string]string{"team": "a"})
		Expect(k8s.Patch(ctx, np, client.MergeFrom(base))).To(Succeed())
		// Long enough for the pass the label change starts, and a second past any rewrite's clock.
		Consistently(func() map[string]map[string]any { return conditionsOf(p.name) }, 2*time.Second).Should(Equal(want))
	})

	It("keeps a condition the NodePool controller writes between two passes", func(ctx SpecContext) {
		c := conditionsOf(p.name)
		ready := c["Ready"]
		ready["status"], ready["reason"], ready["lastTransitionTime"] = "False", "NodesNotReady", "2026-01-03T00:00:00Z"
		setStatusConditions(ctx, p.name, c["Ready"], c[pool.ConditionProgressing], c[pool.ConditionComplete], c[pool.ConditionDegraded])
		w.pullSecret = `{"auths":{"quay.io":{"auth":"b3duZWQ="}}}`
		p.payloadChange(ctx, rollout, "r2", w)
		Eventually(func(g Gomega) {
			c := conditionsOf(p.name)
			g.Expect(c).To(HaveKeyWithValue(pool.ConditionComplete, HaveKeyWithValue("status", "True")))
			g.Expect(c[pool.ConditionComplete]["lastTransitionTime"]).NotTo(Equal(before), "the refresh moved Complete to False and back")
			g.Expect(c).To(HaveKeyWithValue("Ready", And(HaveKeyWithValue("status", "False"), HaveKeyWithValue("reason", "NodesNotReady"))))
		}).Should(Succeed())
	})
})
