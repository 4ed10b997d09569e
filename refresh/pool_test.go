package refresh_test

import (
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
