package controller_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controller "github.com/bootimage-operator/bootimage-operator/refreshcontroller"
)

var _ = Describe("A CA bundle rotation and the daemon's Restart capability (item 11)", Ordered, func() {
	p := testPool{name: "capable", maxUnavailable: 1}
	nodes := []string{"capable-0", "capable-1"}
	const rollout = "bababab0"
	w := baseWorker()
	w.caBundle = "-----BEGIN CERTIFICATE-----\nMIIB1\n-----END CERTIFICATE-----\n"

	It("leaves it to the next rollout while a daemon has not said it runs Restart, naming the node", func(ctx SpecContext) {
		p.create(ctx, rollout, "c1", w, nodes...)
		expectStates(p.name, 0, complete)
		n := getNode("capable-0")
		base := n.DeepCopy()
		n.Annotations[controller.DaemonCapabilitiesAnnotation] = controller.CapabilityRestart
		Expect(k8s.Patch(ctx, n, client.MergeFrom(base))).To(Succeed())
		created := watched.Created(p.namespace())
		w.caBundle = "-----BEGIN CERTIFICATE-----\nMIIB2\n-----END CERTIFICATE-----\n"
		p.payloadChange(ctx, rollout, "c2", w)
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Complete.Reason).To(Equal(controller.ReasonNotARefresh))
			g.Expect(s.Complete.Message).To(ContainSubstring(controller.ReasonNeedsRestartCapableDaemon))
			g.Expect(s.Complete.Message).To(ContainSubstring("capable-1"))
			g.Expect(s.Complete.Message).NotTo(ContainSubstring("capable-0"))
		}).Should(Succeed())
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(Equal(created))
	})

	It("refreshes it in place once every daemon says it runs Restart", func(ctx SpecContext) {
		before := reboots(nodes...)
		n := getNode("capable-1")
		base := n.DeepCopy()
		n.Annotations[controller.DaemonCapabilitiesAnnotation] = "Reload," + controller.CapabilityRestart
		Expect(k8s.Patch(ctx, n, client.MergeFrom(base))).To(Succeed())
		expectRefreshed(p, "c2", w, before, nodes...)
		for _, name := range nodes {
			Expect(os.ReadFile(filepath.Join(daemon.Root, name, caBundleFile))).To(BeEquivalentTo(w.caBundle), name)
		}
	})
})
