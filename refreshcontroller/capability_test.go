package controller_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
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

var _ = Describe("A proxy change and the daemon's Restart capability (item 11)", Ordered, func() {
	p := testPool{name: "proxied", maxUnavailable: 1}
	nodes := []string{"proxied-0", "proxied-1"}
	const rollout = "bababab1"
	w := baseWorker()
	w.proxy = "HTTPS_PROXY=http://proxy-a.example.com:3128\nNO_PROXY=.cluster.local\n"

	It("leaves it to the next rollout while no daemon says it runs Restart, naming the nodes", func(ctx SpecContext) {
		p.create(ctx, rollout, "y1", w, nodes...)
		expectStates(p.name, 0, complete)
		created := watched.Created(p.namespace())
		w.proxy = "HTTPS_PROXY=http://proxy-b.example.com:3128\nNO_PROXY=.cluster.local\n"
		p.payloadChange(ctx, rollout, "y2", w)
		Eventually(func(g Gomega) {
			s := parseSnapshot(nodePool(p.name))
			g.Expect(s.Complete.Reason).To(Equal(controller.ReasonNotARefresh))
			g.Expect(s.Complete.Message).To(ContainSubstring(controller.ReasonNeedsRestartCapableDaemon))
			g.Expect(s.Complete.Message).To(ContainSubstring(controller.ProxyEnvFile))
			g.Expect(s.Complete.Message).To(ContainSubstring("proxied-0, proxied-1"))
		}).Should(Succeed())
		Consistently(func() int { return watched.Created(p.namespace()) }).Should(Equal(created))
		Expect(recordsOf(nodes...)).To(Equal([]string{"y1", "y1"}))
	})

	It("refreshes it in place once every daemon says so: crio and the kubelet restart, nothing reboots", func(ctx SpecContext) {
		before := reboots(nodes...)
		for _, name := range nodes {
			n := getNode(name)
			base := n.DeepCopy()
			n.Annotations[controller.DaemonCapabilitiesAnnotation] = controller.CapabilityRestart
			Expect(k8s.Patch(ctx, n, client.MergeFrom(base))).To(Succeed())
		}
		expectRefreshed(p, "y2", w, before, nodes...)
		for _, name := range nodes {
			Expect(os.ReadFile(filepath.Join(daemon.Root, name, proxyFile))).To(BeEquivalentTo(w.proxy), name)
			Expect(daemon.Actions(name)).To(Equal([]string{"Restart crio.service", "Restart kubelet.service"}), "the daemon's own table, on %s", name)
		}
		paths, err := hypershift.ParseNoRebootPaths([]byte(upgradeConfigMap(p).Data[hypershift.KeyNoRebootPaths]))
		Expect(err).NotTo(HaveOccurred())
		Expect(paths).To(ContainElement(hypershift.NoRebootPath{Path: proxyFile, Action: "Restart", Services: []string{"crio.service", "kubelet.service"}}),
			"the ConfigMap tells a daemon that reads no-reboot-paths the same")
	})
})
