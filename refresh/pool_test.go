package refresh_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

var _ = Describe("Pool progress", func() {
	node := func(name, cfg, state string) refresh.NodeState {
		return refresh.NodeState{Name: name, RefreshConfig: cfg, State: state}
	}
	cond := func(p refresh.Progress, t string) metav1.Condition {
		for _, c := range p.Conditions {
			if c.Type == t {
				return c
			}
		}
		return metav1.Condition{}
	}

	It("refreshes up to maxUnavailable nodes at a time, counting busy ones", func() {
		p := refresh.Plan(refresh.PoolState{Target: "new", MaxUnavailable: 2, Nodes: []refresh.NodeState{
			node("n5", "old", "Done"), node("n1", "new", "Done"), node("n2", "old", "Working"), node("n3", "old", "Done"), node("n4", "old", "Done"),
		}})
		Expect(p.Refresh).To(Equal([]string{"n3"}))
		Expect(cond(p, refresh.ConditionProgressing)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", "Refreshing 4/5 nodes")))
		Expect(cond(p, refresh.ConditionComplete).Status).To(Equal(metav1.ConditionFalse))
	})

	It("never targets a node with a daemon pod, and leaves upgrading nodes to the upgrade", func() {
		withPod := node("a", "old", "Done")
		withPod.DaemonPod = true
		upgrading := node("b", "old", "Done")
		upgrading.Upgrading = true
		p := refresh.Plan(refresh.PoolState{Target: "new", MaxUnavailable: 5, Nodes: []refresh.NodeState{withPod, upgrading, node("c", "old", "Done")}})
		Expect(p.Refresh).To(Equal([]string{"c"}))
	})

	It("pauses during a Replace rollout", func() {
		p := refresh.Plan(refresh.PoolState{Target: "new", ReplaceRollout: true, Nodes: []refresh.NodeState{node("a", "old", "Done")}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(cond(p, refresh.ConditionProgressing)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "PausedForRollout")))
	})

	It("completes when every node runs the target", func() {
		p := refresh.Plan(refresh.PoolState{Target: "new", Nodes: []refresh.NodeState{node("a", "new", "Done"), node("b", "new", "Done")}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(cond(p, refresh.ConditionComplete)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", "2/2 nodes refreshed")))
		Expect(cond(p, refresh.ConditionProgressing).Status).To(Equal(metav1.ConditionFalse))
	})

	It("reports failed nodes and counts them as unavailable", func() {
		failed := node("a", "old", "Degraded")
		failed.Reason = "failed to restart crio.service"
		p := refresh.Plan(refresh.PoolState{Target: "new", MaxUnavailable: 1, Nodes: []refresh.NodeState{failed, node("b", "old", "Done")}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(cond(p, refresh.ConditionDegraded)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", "1 node(s) failed to refresh: a: failed to restart crio.service")))
	})
})

var _ = Describe("Pool progress beside HyperShift's in-place upgrader", func() {
	const rolloutTarget, payloadHash = "6669fa99", "b580dc5d"
	target := refresh.DeliveryCurrentConfig.Target(rolloutTarget, payloadHash)
	cond := func(p refresh.Progress, t string) metav1.Condition {
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
			refresh.CurrentConfigAnnotation: rolloutTarget, refresh.DesiredConfigAnnotation: rolloutTarget, refresh.StateAnnotation: refresh.StateDone,
			refresh.DesiredDrainAnnotation: "uncordon-" + rolloutTarget, refresh.LastAppliedDrainAnnotation: "uncordon-" + rolloutTarget,
		}
	}
	plan := func(annotations map[string]string, pod bool) refresh.Progress {
		return refresh.Plan(refresh.PoolState{Target: target, Nodes: []refresh.NodeState{
			refresh.NodeStateFromAnnotations("n1", annotations, pod, refresh.DeliveryCurrentConfig),
		}})
	}

	It("uses a refresh target no rollout target can equal, and one the drainer can split", func() {
		Expect(target).To(Equal("6669fa99-b580dc5d"))
		Expect(strings.SplitN("drain-"+target, "-", 2)[0]).To(Equal("drain"))
		Expect(refresh.DeliveryRefreshAnnotation.Target(rolloutTarget, payloadHash)).To(Equal(payloadHash))
	})

	It("follows today's daemon through a refresh and its drain handshake, then removes the pod", func() {
		node := atRollout()
		Expect(plan(node, false).Refresh).To(Equal([]string{"n1"}), "currentConfig is the rollout target: not refreshed")

		// The refresh side sets desiredConfig and starts the pod; the daemon asks for a drain.
		node[refresh.DesiredConfigAnnotation] = target
		Expect(plan(node, true).Refresh).To(BeEmpty())
		node[refresh.StateAnnotation] = refresh.StateWorking
		node[refresh.DesiredDrainAnnotation] = "drain-" + target
		p := plan(node, true)
		Expect(p.Refresh).To(BeEmpty())
		Expect(p.RemovePods).To(BeEmpty())

		// Drained; the daemon applies, writes currentConfig=<ConfigMap hash> and asks to uncordon.
		node[refresh.LastAppliedDrainAnnotation] = "drain-" + target
		node[refresh.StateAnnotation] = refresh.StateDone
		node[refresh.CurrentConfigAnnotation] = target
		node[refresh.DesiredDrainAnnotation] = "uncordon-" + target
		p = plan(node, true)
		Expect(p.RemovePods).To(BeEmpty(), "the uncordon is still open: the pod stays")
		Expect(cond(p, refresh.ConditionComplete).Status).To(Equal(metav1.ConditionFalse))

		node[refresh.LastAppliedDrainAnnotation] = "uncordon-" + target
		p = plan(node, true)
		Expect(p.RemovePods).To(Equal([]string{"n1"}))
		Expect(cond(p, refresh.ConditionComplete).Status).To(Equal(metav1.ConditionTrue))
		Expect(plan(node, false).RemovePods).To(BeEmpty())
	})

	It("reads currentRefreshConfig for a daemon that reports refreshes there", func() {
		node := atRollout()
		node[refresh.CurrentRefreshConfigAnnotation] = payloadHash
		n := refresh.NodeStateFromAnnotations("n1", node, false, refresh.DeliveryRefreshAnnotation)
		p := refresh.Plan(refresh.PoolState{Target: payloadHash, Nodes: []refresh.NodeState{n}})
		Expect(cond(p, refresh.ConditionComplete).Status).To(Equal(metav1.ConditionTrue))
	})

	It("pauses while the MachineSet says an in-place upgrade runs, and leaves its pods alone", func() {
		done := atRollout()
		done[refresh.CurrentConfigAnnotation], done[refresh.DesiredConfigAnnotation] = target, target
		done[refresh.DesiredDrainAnnotation], done[refresh.LastAppliedDrainAnnotation] = "uncordon-"+target, "uncordon-"+target
		machineSet := map[string]string{refresh.MachineSetTargetConfigVersionAnnotation: "d6d65ef4", refresh.MachineSetCurrentConfigVersionAnnotation: rolloutTarget}
		p := refresh.Plan(refresh.PoolState{Target: target, MaxUnavailable: 3, InPlaceUpgrade: refresh.InPlaceUpgradeInProgress(machineSet), Nodes: []refresh.NodeState{
			refresh.NodeStateFromAnnotations("n1", atRollout(), false, refresh.DeliveryCurrentConfig),
			refresh.NodeStateFromAnnotations("n2", done, true, refresh.DeliveryCurrentConfig),
		}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(p.RemovePods).To(BeEmpty())
		Expect(cond(p, refresh.ConditionProgressing)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "PausedForUpgrade")))
	})

	It("never starts a node whose drain handshake is open", func() {
		node := atRollout()
		node[refresh.DesiredDrainAnnotation] = "drain-" + rolloutTarget
		Expect(plan(node, false).Refresh).To(BeEmpty())
	})

	It("does nothing without a target, rather than guess one", func() {
		p := refresh.Plan(refresh.PoolState{Nodes: []refresh.NodeState{{Name: "n1"}}})
		Expect(p.Refresh).To(BeEmpty())
		Expect(cond(p, refresh.ConditionComplete)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "NoTarget")))
	})
})

var _ = Describe("Parse", func() {
	It("reads a MachineConfig in YAML with an Ignition 3.2 config", func() {
		cfg, err := refresh.Parse([]byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-ssh
spec:
  osImageURL: quay.io/openshift/rhcos@sha256:aaa
  kernelArguments: [nosmt]
  fips: true
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/motd
        contents:
          source: data:,hello
`))
		Expect(err).NotTo(HaveOccurred())
		spec := refresh.SpecOf(cfg)
		Expect(spec.OSImageURL).To(Equal("quay.io/openshift/rhcos@sha256:aaa"))
		Expect(spec.KernelArguments).To(Equal([]string{"nosmt"}))
		Expect(spec.FIPS).To(BeTrue())
		Expect(spec.Ignition.Storage.Files).To(HaveLen(1))
		Expect(spec.Ignition.Ignition.Version).To(Equal(refresh.IgnitionVersion))
	})

	It("reads bare Ignition of any 3.x version", func() {
		cfg, err := refresh.Parse([]byte(`{"ignition":{"version":"3.0.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}]}}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(refresh.SpecOf(cfg).Ignition.Passwd.Users).To(HaveLen(1))
	})

	It("refuses a missing MachineConfig instead of deciding on an empty one", func() {
		_, err := refresh.DecideMachineConfigs(nil, &mcfgv1.MachineConfig{}, refresh.DefaultPolicies())
		Expect(err).To(MatchError("current config: no MachineConfig"))
	})

	DescribeTable("says what is wrong",
		func(raw, message string) {
			_, err := refresh.Parse([]byte(raw))
			Expect(err).To(MatchError(ContainSubstring(message)))
			Expect(err.Error()).NotTo(Or(HaveSuffix(" "), ContainSubstring("  ")))
		},
		Entry("spec 2", `{"ignition":{"version":"2.2.0"}}`, `unsupported Ignition version "2.2.0": only spec 3.0.0 to 3.5.0 can be read, as in the MCO`),
		Entry("spec 3.6, which the MCO does not read either", `{"ignition":{"version":"3.6.0"}}`, `unsupported Ignition version "3.6.0": only spec 3.0.0 to 3.5.0`),
		Entry("spec 3.6 experimental", `{"ignition":{"version":"3.6.0-experimental"}}`, `unsupported Ignition version "3.6.0-experimental"`),
		Entry("spec 4", `{"ignition":{"version":"4.0.0"}}`, `unsupported Ignition version "4.0.0"`),
		Entry("not a config", `{"apiVersion":"v1","kind":"ConfigMap"}`, "neither a MachineConfig nor an Ignition config"),
		Entry("not JSON", `[1, 2`, "not YAML or JSON"),
	)
})
