package hypershift_test

import (
	"encoding/json"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
)

// Files the machine config server adds to what it serves, around the MachineConfig's own.
const (
	servedMachineConfigPath = "/etc/mcs-machine-config-content.json"
	encapsulatedConfigPath  = "/etc/ignition-machine-config-encapsulated.json"
	servedKubeconfigPath    = "/etc/kubernetes/kubeconfig"
	kubeletCAPath           = "/etc/kubernetes/kubelet-ca.crt"
	nodeAnnotationsPath     = "/etc/machine-config-daemon/node-annotations.json"
)

// workerMC is a rendered worker MachineConfig as HyperShift's ignition server renders it.
type workerMC struct {
	pullSecret, policyJSON, registries, userCA, kubeletUnit string
	kernelArguments                                         []string
	fips                                                    bool
	sshKey                                                  string
	extraFiles                                              map[string]string
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
	files := map[string]string{}
	for path, contents := range w.extraFiles {
		files[path] = contents
	}
	w.extraFiles = files
	for path, contents := range map[string]string{
		"/var/lib/kubelet/config.json": w.pullSecret, "/etc/containers/policy.json": w.policyJSON, registriesConf: w.registries,
		"/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt": w.userCA,
	} {
		w.extraFiles[path] = contents
	}
	for path, contents := range w.extraFiles {
		ic.Storage.Files = append(ic.Storage.Files, servedFile(path, contents))
	}
	ic.Systemd.Units = []ign.Unit{{Name: "kubelet.service", Enabled: ptr(true), Contents: ptr(w.kubeletUnit)}}
	ic.Passwd.Users = []ign.PasswdUser{{Name: "core", SSHAuthorizedKeys: []ign.SSHAuthorizedKey{ign.SSHAuthorizedKey(w.sshKey)}}}
	return &mcfgv1.MachineConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: "rendered-worker-0123"},
		Spec: mcfgv1.MachineConfigSpec{
			OSImageURL: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:aaa", KernelArguments: w.kernelArguments, FIPS: w.fips,
			Config: runtime.RawExtension{Raw: mustJSON(ic)},
		},
	}
}

// mustJSON marshals what cannot fail to marshal; it serves examples too, where no Gomega runs.
func mustJSON(v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return out
}

func servedFile(path, contents string) ign.File {
	return ign.File{Node: ign.Node{Path: path, Overwrite: ptr(true)}, FileEmbedded1: ign.FileEmbedded1{Contents: ign.Resource{Source: ptr(pct(contents))}, Mode: ptr(0o644)}}
}

// served is the Ignition config the machine config server serves for mc: the MachineConfig's
// own Ignition config, plus the files the server adds: the MachineConfig itself (indented
// JSON), the MachineConfig with its Ignition emptied, the kubelet's kubeconfig and CA, and the
// daemon's node annotations.
func served(mc *mcfgv1.MachineConfig, kubeconfig string) []byte {
	var ic ign.Config
	if err := json.Unmarshal(mc.Spec.Config.Raw, &ic); err != nil {
		panic(err)
	}
	content, err := json.MarshalIndent(mc, "", "    ")
	if err != nil {
		panic(err)
	}
	encapsulated := mc.DeepCopy()
	encapsulated.Spec.Config.Raw = []byte(`{"ignition":{"version":"3.5.0"}}`)
	ic.Storage.Files = append(ic.Storage.Files,
		servedFile(encapsulatedConfigPath, string(mustJSON(encapsulated))),
		servedFile(servedMachineConfigPath, string(content)),
		servedFile(servedKubeconfigPath, kubeconfig),
		servedFile(kubeletCAPath, "-----BEGIN CERTIFICATE-----\n"+kubeconfig),
		servedFile(nodeAnnotationsPath, `{"machineconfiguration.openshift.io/currentConfig":"`+mc.Name+`"}`))
	return mustJSON(ic)
}

var _ = Describe("Served payloads", func() {
	oldPayload := func() []byte { return served(baseWorker().machineConfig(), "kubeconfig: token-1") }
	newPayload := func(change func(*workerMC)) []byte {
		w := baseWorker()
		change(&w)
		// The kubeconfig and kubelet CA differ on each serve: files the server adds, never the
		// daemon's business.
		return served(w.machineConfig(), "kubeconfig: token-2")
	}
	newCA := func(w *workerMC) { w.userCA = "-----BEGIN CERTIFICATE-----\nnew\n" }

	DescribeTable("answers what a refresh controller may deliver, on the embedded MachineConfig",
		func(change func(*workerMC), today, withPolicies string, actions []refresh.Action) {
			v, err := hypershift.DecideRefresh(oldPayload(), newPayload(change))
			Expect(err).NotTo(HaveOccurred())
			Expect(v.Reason).To(Equal(today), v.Message)
			Expect(v.Refresh).To(Equal(today == hypershift.ReasonRefreshable || today == hypershift.ReasonNoChange))
			Expect(v.Result.Actions).To(Equal(actions))
			v, err = hypershift.DecideRefreshWithPolicies(oldPayload(), newPayload(change), refresh.DefaultPolicies())
			Expect(err).NotTo(HaveOccurred())
			Expect(v.Reason).To(Equal(withPolicies), "with the default policies: %s", v.Message)
		},
		Entry("nothing but the server's files changed", func(*workerMC) {}, hypershift.ReasonNoChange, hypershift.ReasonNoChange, []refresh.Action{}),
		Entry("a pull-secret-only change applies in place with no action",
			func(w *workerMC) { w.pullSecret = `{"auths":{"quay.io":{"auth":"bmV3"}}}` }, hypershift.ReasonRefreshable, hypershift.ReasonRefreshable, []refresh.Action{}),
		Entry("an ssh key change applies in place with no action",
			func(w *workerMC) { w.sshKey = "ssh-ed25519 BBBB core@new" }, hypershift.ReasonRefreshable, hypershift.ReasonRefreshable, []refresh.Action{}),
		Entry("policy.json reloads crio", func(w *workerMC) { w.policyJSON = `{"default":[{"type":"reject"}]}` },
			hypershift.ReasonRefreshable, hypershift.ReasonRefreshable, []refresh.Action{reloadCrio}),
		Entry("a digest-only mirror reloads crio, with no drain", func(w *workerMC) {
			w.registries += "\n  [[registry.mirror]]\n    location = \"mirror-b.example.com/ocp-release\"\n    pull-from-mirror = \"digest-only\"\n"
		}, hypershift.ReasonRefreshable, hypershift.ReasonRefreshable, []refresh.Action{reloadCrio}),
		Entry("a mirror that is not digest-only drains: in place, but not a refresh", func(w *workerMC) {
			w.registries += "\n  [[registry.mirror]]\n    location = \"mirror-b.example.com/ocp-release\"\n"
		}, hypershift.ReasonNeedsDrain, hypershift.ReasonNeedsDrain, []refresh.Action{drain, reloadCrio}),
		Entry("a kernel argument change inside the MachineConfig reboots",
			func(w *workerMC) { w.kernelArguments = append(w.kernelArguments, "nosmt") }, hypershift.ReasonNeedsReboot, hypershift.ReasonNeedsReboot, []refresh.Action{}),
		Entry("a FIPS flip inside the MachineConfig is refused", func(w *workerMC) { w.fips = true }, hypershift.ReasonRejected, hypershift.ReasonRejected, []refresh.Action{}),
		Entry("a unit change reboots", func(w *workerMC) { w.kubeletUnit += "Restart=always\n" }, hypershift.ReasonNeedsReboot, hypershift.ReasonNeedsReboot, []refresh.Action{}),
		Entry("the user CA bundle reboots with today's daemon, which does not run its crio restart", newCA,
			hypershift.ReasonNeedsReboot, hypershift.ReasonRefreshable, []refresh.Action{}),
	)

	DescribeTable("says why, naming the change and its rule",
		func(change func(*workerMC), message string) {
			v, err := hypershift.DecideRefresh(oldPayload(), newPayload(change))
			Expect(err).NotTo(HaveOccurred())
			Expect(v.Message).To(Equal(message))
		},
		Entry("nothing to apply", func(*workerMC) {}, "The nodes' MachineConfig does not change: nothing to apply"),
		Entry("a refresh and what runs after it", func(w *workerMC) { w.policyJSON = "{}" }, "Applied in place with no drain and no reboot, then Reload crio.service"),
		Entry("a drain", func(w *workerMC) {
			w.registries += "\n  [[registry.mirror]]\n    location = \"mirror-b.example.com/ocp-release\"\n"
		},
			"Needs a drain, which a refresh never does: file /etc/containers/registries.conf (HyperShift daemon table, /etc/containers/registries.conf: Special with Drain "+
				"(registry quay.io/openshift-release-dev/ocp-release: mirror mirror-b.example.com/ocp-release added without pull-from-mirror = \"digest-only\"))"),
		Entry("a reboot", newCA, "Needs a reboot: file /etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt "+
			"(the HyperShift daemon's table says Restart crio for /etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt, which its sync does not run)"),
		Entry("a refusal", func(w *workerMC) { w.fips = true }, "Cannot be applied to a running node: fips true (a fips change is refused: FIPS cannot be changed on a running cluster)"),
	)

	It("names at most three changes, and counts the rest", func() {
		v, err := hypershift.DecideRefresh(oldPayload(), newPayload(func(w *workerMC) {
			w.kernelArguments = append(w.kernelArguments, "nosmt")
			w.kubeletUnit += "Restart=always\n"
			w.userCA += "more\n"
			w.extraFiles = map[string]string{"/etc/a": "a", "/etc/b": "b"}
		}))
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Message).To(HavePrefix("Needs a reboot: kernelArguments "))
		Expect(v.Message).To(HaveSuffix("; and 2 more"))
	})

	It("names the rule of today's daemon, and its crio restart gap", func() {
		v, err := hypershift.DecideRefresh(oldPayload(), newPayload(newCA))
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Result.Changes).To(ConsistOf(HaveField("Rule", ContainSubstring("which its sync does not run"))))
	})

	It("is what Parse reads, while the bare Ignition view of the same payloads reboots", func() {
		pullSecretOnly := newPayload(func(w *workerMC) { w.pullSecret = `{"auths":{}}` })
		oldCfg, err := refresh.Parse(oldPayload())
		Expect(err).NotTo(HaveOccurred())
		newCfg, err := refresh.Parse(pullSecretOnly)
		Expect(err).NotTo(HaveOccurred())
		Expect(decide(oldCfg, newCfg).Outcome).To(Equal(refresh.InPlace))

		bareOld, err := refresh.FromIgnition(oldPayload())
		Expect(err).NotTo(HaveOccurred())
		bareNew, err := refresh.FromIgnition(pullSecretOnly)
		Expect(err).NotTo(HaveOccurred())
		res := decide(bareOld, bareNew)
		Expect(res.Outcome).To(Equal(refresh.Reboot), "the served files match no policy")
		Expect(res.Changes).To(ContainElement(HaveField("Name", servedMachineConfigPath)))
	})

	It("decides through the upgrade ConfigMap", func() {
		oldCM, err := hypershift.BuildUpgradeConfigMap("workers", oldPayload(), "6669fa99", nil)
		Expect(err).NotTo(HaveOccurred())
		newCM, err := hypershift.BuildUpgradeConfigMap("workers", newPayload(func(w *workerMC) { w.pullSecret = "{}" }), "6669fa99", nil)
		Expect(err).NotTo(HaveOccurred())
		oldRaw, _, _, err := hypershift.ParseUpgradeConfigMap(oldCM)
		Expect(err).NotTo(HaveOccurred())
		newRaw, _, _, err := hypershift.ParseUpgradeConfigMap(newCM)
		Expect(err).NotTo(HaveOccurred())
		v, err := hypershift.DecideRefresh(oldRaw, newRaw)
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Refresh).To(BeTrue())
	})

	DescribeTable("says what is wrong with a payload that is not served config",
		func(payload func() []byte, message string) {
			_, err := refresh.FromServed(payload())
			Expect(err).To(MatchError(ContainSubstring(message)))
			_, err = hypershift.DecideRefresh(oldPayload(), payload())
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

func decide(old, new refresh.Config) refresh.Result {
	GinkgoHelper()
	changes, err := refresh.Diff(old, new)
	Expect(err).NotTo(HaveOccurred())
	return refresh.Decide(changes, defaults)
}

// servedWith is a served payload whose MachineConfig file is changed by change.
func servedWith(change func(*ign.File)) []byte {
	GinkgoHelper()
	var ic ign.Config
	Expect(json.Unmarshal(served(baseWorker().machineConfig(), "kubeconfig"), &ic)).To(Succeed())
	for i := range ic.Storage.Files {
		if ic.Storage.Files[i].Path == servedMachineConfigPath {
			change(&ic.Storage.Files[i])
		}
	}
	out, err := json.Marshal(ic)
	Expect(err).NotTo(HaveOccurred())
	return out
}
