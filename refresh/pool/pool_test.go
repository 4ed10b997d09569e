package pool_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
)

func TestPool(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "refresh/pool")
}

var _ = Describe("Pool progress", func() {
	node := func(name, cfg, state string) pool.NodeState {
		return pool.NodeState{Name: name, RefreshConfig: cfg, State: state}
	}
	cond := func(p pool.Progress, t string) metav1.Condition {
		for _, c := range p.Conditions {
			if c.Type == t {
				return c
			}
		}
		return metav1.Condition{}
	}

	It("refreshes up to maxUnavailable nodes at a time, counting busy ones", func() {
		p := pool.Plan(pool.PoolState{Target: "new", MaxUnavailable: 2, Nodes: []pool.NodeState{
			node("n5", "old", "Done"), node("n1", "new", "Done"), node("n2", "old", "Working"), node("n3", "old", "Done"), node("n4", "old", "Done"),
		}})
		Expect(p.Refresh).To(Equal([]string{"n3"}))
		Expect(cond(p, pool.ConditionProgressing)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", "Refreshing 4/5 nodes")))
		Expect(cond(p, pool.ConditionComplete).Status).To(Equal(metav1.ConditionFalse))
	})

	It("never targets a node with a daemon pod, and leaves upgrading nodes to the upgrade", func() {
		withPod := node("a", "old", "Done")
		withPod.DaemonPod = true
		upgrading := node("b", "old", "Done")
		upgrading.Upgrading = true
		p := pool.Plan(pool.PoolState{Target: "new", MaxUnavailable: 5, Nodes: []pool.NodeState{withPod, upgrading, node("c", "old", "Done")}})
		Expect(p.Refresh).To(Equal([]string{"c"}))
	})

	It("pauses during a Replace rollout", func() {
		p := pool.Plan(pool.PoolState{Target: "new", ReplaceRollout: true, Nodes: []pool.NodeState{node("a", "old", "Done")}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(cond(p, pool.ConditionProgressing)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "PausedForRollout")))
	})

	It("completes when every node runs the target", func() {
		p := pool.Plan(pool.PoolState{Target: "new", Nodes: []pool.NodeState{node("a", "new", "Done"), node("b", "new", "Done")}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(cond(p, pool.ConditionComplete)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", "2/2 nodes refreshed")))
		Expect(cond(p, pool.ConditionProgressing).Status).To(Equal(metav1.ConditionFalse))
	})

	It("reports failed nodes and counts them as unavailable", func() {
		failed := node("a", "old", "Degraded")
		failed.Reason = "failed to restart crio.service"
		p := pool.Plan(pool.PoolState{Target: "new", MaxUnavailable: 1, Nodes: []pool.NodeState{failed, node("b", "old", "Done")}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(cond(p, pool.ConditionDegraded)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", "1 node(s) failed to refresh: a: failed to restart crio.service")))
	})

	// The API server refuses a condition message past 32 KiB: a pool of 2,000 failed nodes, each
	// with a long daemon reason, must still get its status written.
	It("bounds the failed-node message: a count and the first few names", func() {
		var nodes []pool.NodeState
		for i := range 2000 {
			n := node(fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250), "old", pool.StateDegraded)
			n.Reason = "unexpected on-disk state validating against rendered-worker-0123: " + strings.Repeat("content mismatch for file /etc/x; ", 40)
			nodes = append(nodes, n)
		}
		msg := cond(pool.Plan(pool.PoolState{Target: "new", Nodes: nodes}), pool.ConditionDegraded).Message
		Expect(len(msg)).To(BeNumerically("<", 2048), msg)
		Expect(msg).To(HavePrefix("2000 node(s) failed to refresh: ip-10-0-0-0.ec2.internal: unexpected on-disk state"))
		Expect(msg).To(HaveSuffix("; and 1995 more"))
		Expect(strings.Count(msg, ".ec2.internal")).To(Equal(5))
		Expect(utf8.ValidString(msg)).To(BeTrue())
	})
})

var _ = Describe("Pool progress beside HyperShift's in-place upgrader", func() {
	const rolloutTarget, payloadHash = "6669fa99", "b580dc5d"
	target := pool.DeliveryCurrentConfig.Target(rolloutTarget, payloadHash)
	cond := func(p pool.Progress, t string) metav1.Condition {
		for _, c := range p.Conditions {
			if c.Type == t {
				return c
			}
		}
		return metav1.Condition{}
	}
	// A node as the in-place upgrader and today's daemon leave it at the rollout target.
	atRollout := func() map[string]string {
		return map[string]string{
			pool.CurrentConfigAnnotation: rolloutTarget, pool.DesiredConfigAnnotation: rolloutTarget, pool.StateAnnotation: pool.StateDone,
			pool.DesiredDrainAnnotation: "uncordon-" + rolloutTarget, pool.LastAppliedDrainAnnotation: "uncordon-" + rolloutTarget,
		}
	}
	plan := func(annotations map[string]string, pod bool) pool.Progress {
		return pool.Plan(pool.PoolState{Target: target, Nodes: []pool.NodeState{
			pool.NodeStateFromAnnotations("n1", annotations, pod, pool.DeliveryCurrentConfig),
		}})
	}

	It("uses a refresh target no rollout target can equal, and one the drainer can split", func() {
		Expect(target).To(Equal("6669fa99-b580dc5d"))
		Expect(strings.SplitN("drain-"+target, "-", 2)[0]).To(Equal("drain"))
		Expect(pool.DeliveryRefreshAnnotation.Target(rolloutTarget, payloadHash)).To(Equal(payloadHash))
	})

	It("follows today's daemon through a refresh and its drain handshake, then removes the pod", func() {
		node := atRollout()
		Expect(plan(node, false).Refresh).To(Equal([]string{"n1"}), "currentConfig is the rollout target: not refreshed")

		// The refresh side sets desiredConfig and starts the pod; the daemon asks for a drain.
		node[pool.DesiredConfigAnnotation] = target
		Expect(plan(node, true).Refresh).To(BeEmpty())
		node[pool.StateAnnotation] = pool.StateWorking
		node[pool.DesiredDrainAnnotation] = "drain-" + target
		p := plan(node, true)
		Expect(p.Refresh).To(BeEmpty())
		Expect(p.RemovePods).To(BeEmpty())

		// Drained; the daemon applies, writes currentConfig=<ConfigMap hash> and asks to uncordon.
		node[pool.LastAppliedDrainAnnotation] = "drain-" + target
		node[pool.StateAnnotation] = pool.StateDone
		node[pool.CurrentConfigAnnotation] = target
		node[pool.DesiredDrainAnnotation] = "uncordon-" + target
		p = plan(node, true)
		Expect(p.RemovePods).To(BeEmpty(), "the uncordon is still open: the pod stays")
		Expect(cond(p, pool.ConditionComplete).Status).To(Equal(metav1.ConditionFalse))

		node[pool.LastAppliedDrainAnnotation] = "uncordon-" + target
		p = plan(node, true)
		Expect(p.RemovePods).To(Equal([]string{"n1"}))
		Expect(cond(p, pool.ConditionComplete).Status).To(Equal(metav1.ConditionTrue))
		Expect(plan(node, false).RemovePods).To(BeEmpty())
	})

	It("reads currentRefreshConfig for a daemon that reports refreshes there", func() {
		node := atRollout()
		node[pool.CurrentRefreshConfigAnnotation] = payloadHash
		n := pool.NodeStateFromAnnotations("n1", node, false, pool.DeliveryRefreshAnnotation)
		p := pool.Plan(pool.PoolState{Target: payloadHash, Nodes: []pool.NodeState{n}})
		Expect(cond(p, pool.ConditionComplete).Status).To(Equal(metav1.ConditionTrue))
	})

	It("pauses while the MachineSet says an in-place upgrade runs, and leaves its pods alone", func() {
		done := atRollout()
		done[pool.CurrentConfigAnnotation], done[pool.DesiredConfigAnnotation] = target, target
		done[pool.DesiredDrainAnnotation], done[pool.LastAppliedDrainAnnotation] = "uncordon-"+target, "uncordon-"+target
		machineSet := map[string]string{hypershift.MachineSetTargetConfigVersionAnnotation: "d6d65ef4", hypershift.MachineSetCurrentConfigVersionAnnotation: rolloutTarget}
		p := pool.Plan(pool.PoolState{Target: target, MaxUnavailable: 3, InPlaceUpgrade: hypershift.InPlaceUpgradeInProgress(machineSet), Nodes: []pool.NodeState{
			pool.NodeStateFromAnnotations("n1", atRollout(), false, pool.DeliveryCurrentConfig),
			pool.NodeStateFromAnnotations("n2", done, true, pool.DeliveryCurrentConfig),
		}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(p.RemovePods).To(BeEmpty())
		Expect(cond(p, pool.ConditionProgressing)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "PausedForUpgrade")))
	})

	It("never starts a node whose drain handshake is open", func() {
		node := atRollout()
		node[pool.DesiredDrainAnnotation] = "drain-" + rolloutTarget
		Expect(plan(node, false).Refresh).To(BeEmpty())
	})

	It("does nothing without a target, rather than guess one", func() {
		p := pool.Plan(pool.PoolState{Nodes: []pool.NodeState{{Name: "n1"}}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(cond(p, pool.ConditionComplete)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "NoTarget")))
	})
})
