package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
	controller "github.com/bootimage-operator/bootimage-operator/refreshcontroller"
)

// recordsOf lists the currentRefreshConfig of nodes.
func recordsOf(nodes ...string) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, getNode(n).Annotations[pool.CurrentRefreshConfigAnnotation])
	}
	return out
}

func daemonPod(p testPool, node string) *corev1.Pod {
	pod := &corev1.Pod{}
	Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: p.namespace(), Name: hypershift.DaemonPodName(node)}, pod)).To(Succeed())
	return pod
}

var _ = Describe("A payload hash that moves before its payload (item 1)", Ordered, func() {
	p := testPool{name: "late", maxUnavailable: 1}
	nodes := []string{"late-0", "late-1"}
	const rollout = "3a3a3a3a"
	w := baseWorker()

	It("waits, saying so, and records nothing until the token Secret holds the payload of that hash", func(ctx SpecContext) {
		p.create(ctx, rollout, "l1", w, nodes...)
		expectStates(p.name, 0, complete)
		created := watched.Created(p.namespace())
		// The NodePool controller moved the hash; the ignition server has not generated the payload.
		p.annotate(ctx, map[string]string{hypershift.NodePoolTargetRefreshConfigAnnotation: "l2"})
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Complete.Status).To(Equal("False"))
			g.Expect(s.Complete.Reason).To(Equal(controller.ReasonWaitingForPayload))
			g.Expect(s.Complete.Message).To(ContainSubstring("l2"))
		}).Should(Succeed())
		Consistently(func() []string { return recordsOf(nodes...) }).Should(Equal([]string{"l1", "l1"}))
		Expect(watched.Created(p.namespace())).To(Equal(created))
		Expect(upgradeConfigMap(p).Data).To(HaveKeyWithValue(hypershift.KeyHash, pool.RefreshConfigValue(rollout, "l1")))

		before := reboots(nodes...)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"bGF0ZQ=="}}}`
		p.writeToken(ctx, rollout, "l2", w)
		expectRefreshed(p, "l2", w, before, nodes...)
	})
})

var _ = Describe("A lost upgrade ConfigMap during a pending rotation (item 6)", Ordered, func() {
	p := testPool{name: "lost", maxUnavailable: 1}
	nodes := []string{"lost-0", "lost-1"}
	const rollout = "4a4a4a4a"
	w := baseWorker()

	It("does not adopt the token Secret's payload as delivered when the nodes record another", func(ctx SpecContext) {
		p.create(ctx, rollout, "m1", w, nodes...)
		mark := expectStates(p.name, 0, complete)
		p.machineDeploymentStatus(ctx, 2, 1)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"bG9zdA=="}}}`
		p.payloadChange(ctx, rollout, "m2", w)
		expectStates(p.name, mark, pausedForRollout)
		Expect(k8s.Delete(ctx, upgradeConfigMap(p))).To(Succeed())
		p.machineDeploymentStatus(ctx, 2, 2)
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Complete.Reason).To(Equal(controller.ReasonDeliveredPayloadUnknown))
			g.Expect(s.Complete.Message).To(ContainSubstring("lost-0"))
		}).Should(Succeed())
		Consistently(func() []string { return recordsOf(nodes...) }).Should(Equal([]string{"m1", "m1"}))
		Expect(parseSnapshot(nodePool(p.name)).Complete.Status).To(Equal("False"))
	})
})

var _ = Describe("A malformed token payload (item 3)", Ordered, func() {
	p := testPool{name: "malformed", maxUnavailable: 1}
	nodes := []string{"malformed-0"}
	const rollout = "5a5a5a5a"
	w := baseWorker()

	It("is Degraded with the reason, Complete not True, and recovers with a good payload", func(ctx SpecContext) {
		p.create(ctx, rollout, "n1", w, nodes...)
		expectStates(p.name, 0, complete)
		p.writeTokenData(ctx, rollout, "n2", []byte("not gzip"))
		p.annotate(ctx, map[string]string{hypershift.NodePoolTargetRefreshConfigAnnotation: "n2"})
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Degraded.Status).To(Equal("True"))
			g.Expect(s.Degraded.Reason).To(Equal(controller.ReasonInvalidPayload))
			g.Expect(s.Degraded.Message).To(ContainSubstring(controller.TokenSecretName(p.name, rollout)))
			g.Expect(s.Complete.Status).To(Equal("False"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, list, client.InNamespace(hcpNamespace))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.Name == p.name && e.Type == corev1.EventTypeWarning {
					reasons = append(reasons, e.Reason)
				}
			}
			g.Expect(reasons).To(ContainElement(controller.ReasonInvalidPayload))
		}).Should(Succeed(), "a Warning Event on the NodePool")

		before := reboots(nodes...)
		w.sshKey = "ssh-ed25519 DDDD core@v4"
		p.writeToken(ctx, rollout, "n2", w)
		expectRefreshed(p, "n2", w, before, nodes...)
		Eventually(func() string { return parseSnapshot(nodePool(p.name)).Degraded.Status }).Should(Equal("False"))
	})
})

var _ = Describe("A new payload while a daemon pod of the previous one has not finished (item 2)", Ordered, func() {
	p := testPool{name: "supersede", maxUnavailable: 1}
	nodes := []string{"supersede-0", "supersede-1", "supersede-2"}
	const rollout = "6a6a6a6a"
	w := baseWorker()

	It("re-targets the unfinished pod and brings every node to the last payload", func(ctx SpecContext) {
		p.create(ctx, rollout, "s1", w, nodes...)
		expectStates(p.name, 0, complete)
		before := reboots(nodes...)
		daemon.Hold("supersede-0", true)
		DeferCleanup(daemon.Hold, "supersede-0", false)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"czI="}}}`
		p.payloadChange(ctx, rollout, "s2", w)
		Eventually(func() []string { return podNames(p) }).Should(ConsistOf("machine-config-daemon-supersede-0=Pending"))
		w.pullSecret = `{"auths":{"quay.io":{"auth":"czM="}}}`
		p.payloadChange(ctx, rollout, "s3", w)
		Eventually(func() string { return upgradeConfigMap(p).Data[hypershift.KeyHash] }).Should(Equal(pool.RefreshConfigValue(rollout, "s3")))
		daemon.Hold("supersede-0", false)
		expectRefreshed(p, "s3", w, before, nodes...)
		Expect(watched.Peak(p.namespace())).To(Equal(1))
	})

	It("acknowledges a pod that finished the previous payload, then refreshes its node to the new one", func(ctx SpecContext) {
		before := reboots(nodes...)
		daemon.Hold("supersede-0", true)
		DeferCleanup(daemon.Hold, "supersede-0", false)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"czQ="}}}`
		p.payloadChange(ctx, rollout, "s4", w)
		Eventually(func() []string { return podNames(p) }).Should(ConsistOf("machine-config-daemon-supersede-0=Pending"))
		// A Replace rollout pauses the controller while the daemon finishes s4 on supersede-0.
		p.machineDeploymentStatus(ctx, 3, 2)
		Eventually(func() string { return parseSnapshot(nodePool(p.name)).Progressing.Reason }).Should(Equal("PausedForRollout"))
		daemon.Hold("supersede-0", false)
		Eventually(func() []string { return podNames(p) }).Should(ConsistOf("machine-config-daemon-supersede-0=Succeeded"))
		Expect(getNode("supersede-0").Annotations).To(HaveKeyWithValue(pool.DesiredDrainAnnotation, "uncordon-"+pool.RefreshConfigValue(rollout, "s4")))
		w.pullSecret = `{"auths":{"quay.io":{"auth":"czU="}}}`
		p.payloadChange(ctx, rollout, "s5", w)
		p.machineDeploymentStatus(ctx, 3, 3)
		expectRefreshed(p, "s5", w, before, nodes...)
	})
})

var _ = Describe("Daemon pods that cannot finish (item 5)", Ordered, func() {
	p := testPool{name: "podfail", maxUnavailable: 1}
	nodes := []string{"podfail-0", "podfail-1"}
	const rollout = "7a7a7a7a"
	w := baseWorker()
	BeforeAll(func() {
		// The daemon of podfail-0 never acts in these specs: each sets its pod's status.
		daemon.Hold("podfail-0", true)
		DeferCleanup(daemon.Hold, "podfail-0", false)
	})

	It("reports a pod that cannot pull its image as Degraded, naming the node and the reason", func(ctx SpecContext) {
		p.create(ctx, rollout, "f1", w, nodes...)
		expectStates(p.name, 0, complete)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"ZjI="}}}`
		p.payloadChange(ctx, rollout, "f2", w)
		Eventually(func() []string { return podNames(p) }).Should(ConsistOf("machine-config-daemon-podfail-0=Pending"))
		pod := daemonPod(p, "podfail-0")
		pod.Status.Phase = corev1.PodPending
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "machine-config-daemon", Image: "example",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Degraded.Status).To(Equal("True"))
			g.Expect(s.Degraded.Message).To(ContainSubstring("podfail-0:"))
			g.Expect(s.Degraded.Message).To(ContainSubstring("ImagePullBackOff"))
		}).Should(Succeed())
	})

	It("reports a pod running past the deadline without a result as Degraded", func(ctx SpecContext) {
		pod := daemonPod(p, "podfail-0")
		pod.Status.Phase, pod.Status.ContainerStatuses = corev1.PodRunning, nil
		pod.Status.StartTime = &metav1.Time{Time: time.Now().Add(-time.Hour)}
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Degraded.Message).To(ContainSubstring("podfail-0: no result from the daemon pod after 15m0s"))
			g.Expect(s.Complete.Status).To(Equal("False"))
		}).Should(Succeed())
	})

	It("reports an evicted pod as Degraded", func(ctx SpecContext) {
		pod := daemonPod(p, "podfail-0")
		pod.Status.Phase, pod.Status.Reason, pod.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		pod.Status.ContainerStatuses = nil
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Degraded.Message).To(ContainSubstring("podfail-0:"))
			g.Expect(s.Degraded.Message).To(ContainSubstring("Evicted"))
		}).Should(Succeed())
	})
})

var _ = Describe("A daemon pod that cannot be created (item 5)", Ordered, func() {
	p := testPool{name: "stranded", maxUnavailable: 1}
	nodes := []string{"stranded-0", "stranded-1"}
	const rollout = "8a8a8a8a"
	w := baseWorker()

	It("does not strand a node whose pod could not be created after desiredConfig was set", func(ctx SpecContext) {
		p.create(ctx, rollout, "g1", w, nodes...)
		expectStates(p.name, 0, complete)
		// An admission policy refuses every pod of the upgrade namespace, as a quota or a webhook may.
		policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-daemon-pods"},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionv1.Fail),
				MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
						Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
				Validations: []admissionv1.Validation{{Expression: "false", Message: "no daemon pods now"}},
			}}
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "no-daemon-pods"},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
				ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
				MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": p.namespace()}}}}}
		Expect(k8s.Create(ctx, policy)).To(Succeed())
		Expect(k8s.Create(ctx, binding)).To(Succeed())
		Eventually(func() error {
			probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace(), Name: "probe"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example"}}}}
			return k8s.Create(ctx, probe, client.DryRunAll)
		}).Should(MatchError(ContainSubstring("no daemon pods now")), "the policy is in force")
		before := reboots(nodes...)
		w.pullSecret = `{"auths":{"quay.io":{"auth":"ZzI="}}}`
		p.payloadChange(ctx, rollout, "g2", w)
		Eventually(func() string {
			return getNode("stranded-0").Annotations[pool.DesiredConfigAnnotation]
		}).Should(Equal(pool.RefreshConfigValue(rollout, "g2")))
		Consistently(func() []string { return podNames(p) }).Should(BeEmpty())
		Expect(k8s.Delete(ctx, binding)).To(Succeed())
		Expect(k8s.Delete(ctx, policy)).To(Succeed())
		expectRefreshed(p, "g2", w, before, nodes...)
	})
})

var _ = Describe("A failed post-action (item 5)", Ordered, func() {
	p := testPool{name: "postfail", maxUnavailable: 2}
	nodes := []string{"postfail-0", "postfail-1"}
	const rollout = "8b8b8b8b"
	w := baseWorker()
	const why = "Job for crio.service failed because the control process exited with error code"

	It("is Degraded with the daemon's reason, and the refresh is not recorded on that node", func(ctx SpecContext) {
		p.create(ctx, rollout, "r1", w, nodes...)
		expectStates(p.name, 0, complete)
		daemon.SetPostActionFail("postfail-0", why)
		DeferCleanup(daemon.SetPostActionFail, "postfail-0", "")
		w.registries = baseRegistries + safeMirror
		p.payloadChange(ctx, rollout, "r2", w)
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Degraded.Status).To(Equal("True"))
			g.Expect(s.Degraded.Message).To(ContainSubstring("postfail-0:"))
			g.Expect(s.Degraded.Message).To(ContainSubstring("Reload crio.service"))
			g.Expect(s.Degraded.Message).To(ContainSubstring(why))
			g.Expect(s.Complete.Status).To(Equal("False"))
			g.Expect(recordsOf(nodes...)).To(Equal([]string{"r1", "r2"}), "the other node goes on")
		}).Should(Succeed())
		Expect(daemon.Actions("postfail-0")).To(Equal([]string{"Reload crio.service"}))
		n := getNode("postfail-0")
		Expect(n.Annotations).To(HaveKeyWithValue(pool.StateAnnotation, pool.StateDegraded))
		Expect(n.Annotations[pool.LastAppliedDrainAnnotation]).NotTo(HaveSuffix("r2"), "nothing acknowledged")
		// The daemon wrote the files before the reload failed: on disk the node looks refreshed.
		Expect(os.ReadFile(filepath.Join(daemon.Root, "postfail-0", registriesFile))).To(BeEquivalentTo(w.registries))
	})

	It("is not run again on the same payload when its pod is gone: a second run would find nothing to do and report Done", func(ctx SpecContext) {
		created := watched.Created(p.namespace())
		Expect(k8s.Delete(ctx, daemonPod(p, "postfail-0"))).To(Succeed())
		Eventually(func() []string { return podNames(p) }).Should(BeEmpty())
		// A metadata change brings a pass that reads the node without its pod.
		p.annotate(ctx, map[string]string{"example.com/touched": "yes"})
		Consistently(func(g Gomega) {
			g.Expect(watched.Created(p.namespace())).To(Equal(created))
			g.Expect(recordsOf("postfail-0")).To(Equal([]string{"r1"}))
			g.Expect(parseSnapshot(nodePool(p.name)).Degraded.Message).To(ContainSubstring("postfail-0:"))
		}, 2*time.Second).Should(Succeed())
	})

	It("is retried with the next payload once the service is mended", func(ctx SpecContext) {
		daemon.SetPostActionFail("postfail-0", "")
		before := reboots(nodes...)
		// Another registries change, so the reload runs again; a change with no action would leave
		// crio on the mirror list of r2 (docs/hypershift.md, a failed post-action).
		w.registries = baseRegistries + safeMirror + "\n  [[registry.mirror]]\n    location = \"mirror-d.example.com/ocp-release\"\n    pull-from-mirror = \"digest-only\"\n"
		p.payloadChange(ctx, rollout, "r3", w)
		expectRefreshed(p, "r3", w, before, nodes...)
		Eventually(func() string { return parseSnapshot(nodePool(p.name)).Degraded.Status }).Should(Equal("False"))
		Expect(daemon.Actions("postfail-0")).To(Equal([]string{"Reload crio.service", "Reload crio.service"}))
	})
})
