package refresh_test

import (
	"encoding/json"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// workerMC is a rendered worker MachineConfig as HyperShift's ignition server renders it.
type workerMC struct {
	pullSecret, policyJSON, registries, userCA, kubeletUnit string
	kernelArguments                                         []string
	fips                                                    bool
	sshKey                                                  string
}

func baseWorker() workerMC {
	return workerMC{
		pullSecret: `{"auths":{"quay.io":{"auth":"b2xk"}}}`, policyJSON: `{"default":[{"type":"insecureAcceptAnything"}]}`,
		registries: registriesV1, userCA: "-----BEGIN CERTIFICATE-----\nold\n", kubeletUnit: "[Service]\nExecStart=/usr/bin/kubelet\n",
		kernelArguments: []string{"systemd.unified_cgroup_hierarchy=1"}, sshKey: "ssh-ed25519 AAAA core@old",
	}
}

func (w workerMC) machineConfig() *mcfgv1.MachineConfig {
	ic := ign.Config{Ignition: ign.Ignition{Version: "3.5.0"}}
	for path, contents := range map[string]string{
		"/var/lib/kubelet/config.json": w.pullSecret, "/etc/containers/policy.json": w.policyJSON, refresh.RegistriesConf: w.registries,
		"/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt": w.userCA,
	} {
		ic.Storage.Files = append(ic.Storage.Files, servedFile(path, contents))
	}
	ic.Systemd.Units = []ign.Unit{{Name: "kubelet.service", Enabled: ptr(true), Contents: ptr(w.kubeletUnit)}}
	ic.Passwd.Users = []ign.PasswdUser{{Name: "core", SSHAuthorizedKeys: []ign.SSHAuthorizedKey{ign.SSHAuthorizedKey(w.sshKey)}}}
	raw, err := json.Marshal(ic)
	Expect(err).NotTo(HaveOccurred())
	return &mcfgv1.MachineConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: "rendered-worker-0123"},
		Spec: mcfgv1.MachineConfigSpec{
			OSImageURL: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:aaa", KernelArguments: w.kernelArguments, FIPS: w.fips,
			Config: runtime.RawExtension{Raw: raw},
		},
	}
}

func servedFile(path, contents string) ign.File {
	return ign.File{Node: ign.Node{Path: path, Overwrite: ptr(true)}, FileEmbedded1: ign.FileEmbedded1{Contents: ign.Resource{Source: ptr(pct(contents))}, Mode: ptr(0o644)}}
}

// served is the Ignition config the machine config server serves for mc: the MachineConfig's
// own Ignition config, plus the files the server adds: the MachineConfig itself (indented
// JSON), the MachineConfig with its Ignition emptied, and the kubelet's kubeconfig.
func served(mc *mcfgv1.MachineConfig, kubeconfig string) []byte {
	GinkgoHelper()
	var ic ign.Config
	Expect(json.Unmarshal(mc.Spec.Config.Raw, &ic)).To(Succeed())
	content, err := json.MarshalIndent(mc, "", "    ")
	Expect(err).NotTo(HaveOccurred())
	encapsulated := mc.DeepCopy()
	encapsulated.Spec.Config.Raw = []byte(`{"ignition":{"version":"3.5.0"}}`)
	enc, err := json.Marshal(encapsulated)
	Expect(err).NotTo(HaveOccurred())
	ic.Storage.Files = append(ic.Storage.Files,
		servedFile(refresh.EncapsulatedConfigPath, string(enc)),
		servedFile(refresh.ServedMachineConfigPath, string(content)),
		servedFile(refresh.ServedKubeconfigPath, kubeconfig))
	out, err := json.Marshal(ic)
	Expect(err).NotTo(HaveOccurred())
	return out
}

var _ = Describe("Served payloads", func() {
	oldPayload := func() []byte { return served(baseWorker().machineConfig(), "kubeconfig: token-1") }
	newPayload := func(change func(*workerMC)) []byte {
		w := baseWorker()
		change(&w)
		// The kubeconfig differs on each serve: a file the server adds, never the daemon's business.
		return served(w.machineConfig(), "kubeconfig: token-2")
	}
	newCA := func(w *workerMC) { w.userCA = "-----BEGIN CERTIFICATE-----\nnew\n" }

	DescribeTable("decides on the embedded MachineConfig, as the HyperShift-mode daemon diffs it",
		func(change func(*workerMC), daemon, defaults refresh.Outcome, actions []refresh.Action) {
			res, err := refresh.DecideServedForHyperShiftDaemon(oldPayload(), newPayload(change))
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Outcome).To(Equal(daemon), "%+v", res.Changes)
			Expect(res.Actions).To(Equal(actions))
			res, err = refresh.DecideServed(oldPayload(), newPayload(change), refresh.DefaultPolicies())
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Outcome).To(Equal(defaults), "with the default policies: %+v", res.Changes)
		},
		Entry("nothing but the server's files changed", func(*workerMC) {}, refresh.NoChange, refresh.NoChange, []refresh.Action{}),
		Entry("a pull-secret-only change applies in place with no action",
			func(w *workerMC) { w.pullSecret = `{"auths":{"quay.io":{"auth":"bmV3"}}}` }, refresh.InPlace, refresh.InPlace, []refresh.Action{}),
		Entry("an ssh key change applies in place with no action",
			func(w *workerMC) { w.sshKey = "ssh-ed25519 BBBB core@new" }, refresh.InPlace, refresh.InPlace, []refresh.Action{}),
		Entry("policy.json reloads crio", func(w *workerMC) { w.policyJSON = `{"default":[{"type":"reject"}]}` },
			refresh.InPlace, refresh.InPlace, []refresh.Action{reloadCrio}),
		Entry("a mirror that is not digest-only drains, then reloads crio", func(w *workerMC) {
			w.registries += "\n  [[registry.mirror]]\n    location = \"mirror-b.example.com/ocp-release\"\n"
		}, refresh.InPlace, refresh.InPlace, []refresh.Action{drain, reloadCrio}),
		Entry("a kernel argument change inside the MachineConfig reboots",
			func(w *workerMC) { w.kernelArguments = append(w.kernelArguments, "nosmt") }, refresh.Reboot, refresh.Reboot, []refresh.Action{}),
		Entry("a FIPS flip inside the MachineConfig is refused", func(w *workerMC) { w.fips = true }, refresh.Reject, refresh.Reject, []refresh.Action{}),
		Entry("a unit change reboots", func(w *workerMC) { w.kubeletUnit += "Restart=always\n" }, refresh.Reboot, refresh.Reboot, []refresh.Action{}),
		Entry("the user CA bundle reboots with today's daemon, which does not run its crio restart", newCA, refresh.Reboot, refresh.InPlace, []refresh.Action{}),
	)

	It("names the rule of today's daemon, and its crio restart gap", func() {
		res, err := refresh.DecideServedForHyperShiftDaemon(oldPayload(), newPayload(newCA))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Changes).To(ConsistOf(HaveField("Rule", ContainSubstring("which its sync does not run"))))
	})

	It("is what Parse reads, while the bare Ignition view of the same payloads reboots", func() {
		pullSecretOnly := newPayload(func(w *workerMC) { w.pullSecret = `{"auths":{}}` })
		oldCfg, err := refresh.Parse(oldPayload())
		Expect(err).NotTo(HaveOccurred())
		newCfg, err := refresh.Parse(pullSecretOnly)
		Expect(err).NotTo(HaveOccurred())
		Expect(decide(oldCfg, newCfg, defaults).Outcome).To(Equal(refresh.InPlace))

		bareOld, err := refresh.FromIgnition(oldPayload())
		Expect(err).NotTo(HaveOccurred())
		bareNew, err := refresh.FromIgnition(pullSecretOnly)
		Expect(err).NotTo(HaveOccurred())
		res := decide(bareOld, bareNew, defaults)
		Expect(res.Outcome).To(Equal(refresh.Reboot), "the served files match no policy")
		Expect(res.Changes).To(ContainElement(HaveField("Name", refresh.ServedMachineConfigPath)))
	})

	It("decides through the upgrade ConfigMap", func() {
		oldCM, err := refresh.BuildUpgradeConfigMap("workers", oldPayload(), "6669fa99", nil)
		Expect(err).NotTo(HaveOccurred())
		newCM, err := refresh.BuildUpgradeConfigMap("workers", newPayload(func(w *workerMC) { w.pullSecret = "{}" }), "6669fa99", nil)
		Expect(err).NotTo(HaveOccurred())
		oldRaw, _, _, err := refresh.ParseUpgradeConfigMap(oldCM)
		Expect(err).NotTo(HaveOccurred())
		newRaw, _, _, err := refresh.ParseUpgradeConfigMap(newCM)
		Expect(err).NotTo(HaveOccurred())
		res, err := refresh.DecideServedForHyperShiftDaemon(oldRaw, newRaw)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Outcome).To(Equal(refresh.InPlace))
	})

	DescribeTable("says what is wrong with a payload that is not served config",
		func(payload func() []byte, message string) {
			_, err := refresh.FromServed(payload())
			Expect(err).To(MatchError(ContainSubstring(message)))
			_, err = refresh.DecideServed(oldPayload(), payload(), defaults)
			Expect(err).To(MatchError(And(HavePrefix("new payload: "), ContainSubstring(message))))
		},
		Entry("empty", func() []byte { return nil }, "empty payload: no served config"),
		Entry("bare Ignition", func() []byte { return []byte(`{"ignition":{"version":"3.5.0"}}`) },
			"served config: no file /etc/mcs-machine-config-content.json, so this is not a config the machine config server served"),
		Entry("a spec the MCO does not read", func() []byte { return []byte(`{"ignition":{"version":"3.6.0"}}`) }, `served config: unsupported Ignition version "3.6.0"`),
		Entry("a compressed MachineConfig file", func() []byte {
			return servedWith(func(f *ign.File) { f.Contents.Compression = ptr("gzip") })
		}, `/etc/mcs-machine-config-content.json has compression "gzip", which the daemon does not read`),
		Entry("a remote MachineConfig file", func() []byte {
			return servedWith(func(f *ign.File) { f.Contents.Source = ptr("https://example.com/mc.json") })
		}, "/etc/mcs-machine-config-content.json has no data URL contents"),
		Entry("not JSON", func() []byte { return servedWith(func(f *ign.File) { f.Contents.Source = ptr(pct("{")) }) },
			"/etc/mcs-machine-config-content.json is not a MachineConfig"),
		Entry("another kind", func() []byte {
			return servedWith(func(f *ign.File) { f.Contents.Source = ptr(pct(`{"kind":"ConfigMap"}`)) })
		}, "/etc/mcs-machine-config-content.json holds a ConfigMap, not a MachineConfig"),
		Entry("a MachineConfig whose Ignition is broken", func() []byte {
			return servedWith(func(f *ign.File) {
				f.Contents.Source = ptr(pct(`{"kind":"MachineConfig","metadata":{"name":"rendered-worker-x"},"spec":{"config":{"ignition":{"version":"2.2.0"}}}}`))
			})
		}, `MachineConfig "rendered-worker-x" spec.config: unsupported Ignition version "2.2.0"`),
	)
})

// servedWith is a served payload whose MachineConfig file is changed by change.
func servedWith(change func(*ign.File)) []byte {
	GinkgoHelper()
	var ic ign.Config
	Expect(json.Unmarshal(served(baseWorker().machineConfig(), "kubeconfig"), &ic)).To(Succeed())
	for i := range ic.Storage.Files {
		if ic.Storage.Files[i].Path == refresh.ServedMachineConfigPath {
			change(&ic.Storage.Files[i])
		}
	}
	out, err := json.Marshal(ic)
	Expect(err).NotTo(HaveOccurred())
	return out
}
