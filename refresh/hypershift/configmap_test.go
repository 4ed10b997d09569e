package hypershift_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
)

var _ = Describe("The HyperShift push", func() {
	It("round-trips the upgrade ConfigMap", func() {
		payload := []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hello"}}]}}`)
		paths := hypershift.NoRebootPathsFromPolicies(defaults)
		cm, err := hypershift.BuildUpgradeConfigMap("workers", payload, "abc123", paths)
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Namespace).To(Equal("workers-upgrade"))
		Expect(cm.Name).To(Equal("workers-upgrade"))
		gotPayload, hash, gotPaths, err := hypershift.ParseUpgradeConfigMap(cm)
		Expect(err).NotTo(HaveOccurred())
		Expect(gotPayload).To(Equal(payload))
		Expect(hash).To(Equal("abc123"))
		Expect(gotPaths).To(Equal(paths))
	})

	It("says what is wrong with a broken ConfigMap", func() {
		cm, _ := hypershift.BuildUpgradeConfigMap("workers", []byte("{}"), "h", nil)
		cm.Data[hypershift.KeyConfig] = "!!!"
		_, _, _, err := hypershift.ParseUpgradeConfigMap(cm)
		Expect(err).To(MatchError(ContainSubstring("ConfigMap workers-upgrade/workers-upgrade key config: not base64")))
	})

	It("generates no-reboot-paths from the policies it can express, as files and folders", func() {
		paths := hypershift.NoRebootPathsFromPolicies(defaults)
		Expect(paths).To(ContainElements(
			hypershift.NoRebootPath{Path: "/etc/containers/registries.d", Action: "Reload", Services: []string{"crio.service"}},
			hypershift.NoRebootPath{Path: "/etc/containers/registries.d/", Action: "Reload", Services: []string{"crio.service"}},
			hypershift.NoRebootPath{Path: "/var/lib/kubelet/config.json", Action: "None"},
			hypershift.NoRebootPath{Path: "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt", Action: "Restart", Services: []string{"coreos-update-ca-trust.service", "crio.service"}},
		))
		for _, p := range paths {
			Expect(strings.TrimSuffix(p.Path, "/")).NotTo(Equal(registriesConf), "Special is not expressible")
			Expect(p.Path).NotTo(ContainSubstring("40-kubelet-crio-image-credential-provider"), "DaemonReload is not expressible")
		}
	})

	It("generates clean paths, leaves out a policy for / (it matches no file) and keeps the first of a path listed twice", func() {
		policies := refresh.Policies{Files: []operatorv1.NodeDisruptionPolicyStatusFile{
			{Path: "/etc/app/", Actions: []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.NoneStatusAction}}},
			{Path: "/etc/app", Actions: []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.RebootStatusAction}}},
			{Path: "/", Actions: []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.NoneStatusAction}}},
		}}
		Expect(hypershift.NoRebootPathsFromPolicies(policies)).To(Equal([]hypershift.NoRebootPath{
			{Path: "/etc/app", Action: "None"}, {Path: "/etc/app/", Action: "None"},
		}))
	})

	It("refuses a config that decompresses beyond the bound, naming it", func() {
		cm, err := hypershift.BuildUpgradeConfigMap("workers", make([]byte, maxDecompressedBytes+1), "h", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(cm.Data[hypershift.KeyConfig])).To(BeNumerically("<", 1<<20), "the bomb is small on the wire")
		_, _, _, err = hypershift.ParseUpgradeConfigMap(cm)
		Expect(err).To(MatchError("ConfigMap workers-upgrade/workers-upgrade key config: gzip data expands to more than 64 MiB"))

		cm, err = hypershift.BuildUpgradeConfigMap("workers", make([]byte, maxDecompressedBytes), "h", nil)
		Expect(err).NotTo(HaveOccurred())
		payload, _, _, err := hypershift.ParseUpgradeConfigMap(cm)
		Expect(err).NotTo(HaveOccurred(), "exactly the bound is fine")
		Expect(payload).To(HaveLen(maxDecompressedBytes))
	})

	Describe("deciding with a received list", func() {
		allowed := hypershift.AllowedServices(defaults)
		decideWith := func(old, new refresh.Config, paths []hypershift.NoRebootPath) refresh.Result {
			GinkgoHelper()
			changes, err := refresh.Diff(old, new)
			Expect(err).NotTo(HaveOccurred())
			return hypershift.DecideWithNoRebootPaths(changes, defaults, paths, allowed)
		}
		motd := func(s string) refresh.Config { return config(withFile("/etc/motd", b64(s), 0o644)) }

		It("relaxes a file the list names", func() {
			res := decideWith(motd("a"), motd("b"), []hypershift.NoRebootPath{{Path: "/etc/motd", Action: "None"}})
			Expect(res.Outcome).To(Equal(refresh.InPlace))
		})

		It("matches below a folder entry and normalises services", func() {
			res := decideWith(config(), config(withFile("/etc/pki/ca-trust/source/anchors/extra.crt", b64("x"), 0o644)),
				[]hypershift.NoRebootPath{{Path: "/etc/pki/ca-trust/source/anchors/", Action: "Restart", Services: []string{"update-ca-trust", "crio"}}})
			Expect(res.Actions).To(Equal([]refresh.Action{{Type: refresh.ActionRestart, Unit: "coreos-update-ca-trust.service"}, restartCrio}))
		})

		DescribeTable("tampered or hostile entries still reboot or reject",
			func(old, new refresh.Config, paths []hypershift.NoRebootPath, outcome refresh.Outcome) {
				Expect(decideWith(old, new, paths).Outcome).To(Equal(outcome))
			},
			Entry("a kernel argument change listed as a path", config(), config(func(c *nodeSpec) { c.KernelArguments = []string{"mitigations=off"} }),
				[]hypershift.NoRebootPath{{Path: "/", Action: "None"}, {Path: "/proc/cmdline", Action: "None"}}, refresh.Reboot),
			Entry("an OS image change", config(), config(func(c *nodeSpec) { c.OSImageURL = "quay.io/evil@sha256:1" }),
				[]hypershift.NoRebootPath{{Path: "/", Action: "None"}}, refresh.Reboot),
			Entry("a service outside the allowlist", motd("a"), motd("b"),
				[]hypershift.NoRebootPath{{Path: "/etc/motd", Action: "Restart", Services: []string{"sshd"}}}, refresh.Reboot),
			Entry("a shell command as a service", motd("a"), motd("b"),
				[]hypershift.NoRebootPath{{Path: "/etc/motd", Action: "Restart", Services: []string{"crio; rm -rf /"}}}, refresh.Reboot),
			Entry("a relative path", motd("a"), motd("b"), []hypershift.NoRebootPath{{Path: "etc/motd", Action: "None"}}, refresh.Reboot),
			Entry("a path with ..", motd("a"), motd("b"), []hypershift.NoRebootPath{{Path: "/etc/x/../motd", Action: "None"}}, refresh.Reboot),
			Entry("an unknown action", motd("a"), motd("b"), []hypershift.NoRebootPath{{Path: "/etc/motd", Action: "Exec", Services: []string{"crio"}}}, refresh.Reboot),
			Entry("None with services", motd("a"), motd("b"), []hypershift.NoRebootPath{{Path: "/etc/motd", Action: "None", Services: []string{"crio"}}}, refresh.Reboot),
			Entry("Restart without services", motd("a"), motd("b"), []hypershift.NoRebootPath{{Path: "/etc/motd", Action: "Restart"}}, refresh.Reboot),
			Entry("a directory under a root entry", config(), config(func(c *nodeSpec) {
				c.Ignition.Storage.Directories = append(c.Ignition.Storage.Directories, dir("/etc/x"))
			}), []hypershift.NoRebootPath{{Path: "/", Action: "None"}}, refresh.Reject),
		)
	})
})

// hyperShiftEncoding is HyperShift's payload encoding written from its description: gzip at
// best compression streamed into a standard base64 encoder; nothing at all for an empty payload.
func hyperShiftEncoding(payload []byte) string {
	GinkgoHelper()
	if len(payload) == 0 {
		return ""
	}
	var out bytes.Buffer
	b64w := base64.NewEncoder(base64.StdEncoding, &out)
	zw, err := gzip.NewWriterLevel(b64w, gzip.BestCompression)
	Expect(err).NotTo(HaveOccurred())
	_, err = io.Copy(zw, bytes.NewReader(payload))
	Expect(err).NotTo(HaveOccurred())
	Expect(zw.Close()).To(Succeed())
	Expect(b64w.Close()).To(Succeed())
	return out.String()
}

var _ = Describe("The upgrade ConfigMap beside HyperShift's in-place upgrader", func() {
	large := bytes.Repeat([]byte(`{"path":"/etc/motd","contents":{"source":"data:,hello"}},`), 20000)
	DescribeTable("has config bytes identical to HyperShift's for the same payload",
		func(payload []byte) {
			want := hyperShiftEncoding(payload)
			got, err := hypershift.EncodePayload(payload)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(want))
			cm, err := hypershift.BuildUpgradeConfigMap("workers", payload, "6669fa99", nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(cm.Data).To(Equal(map[string]string{hypershift.KeyConfig: want, hypershift.KeyHash: "6669fa99"}))
			back, hash, paths, err := hypershift.ParseUpgradeConfigMap(cm)
			Expect(err).NotTo(HaveOccurred())
			Expect(back).To(HaveLen(len(payload)))
			if len(payload) > 0 {
				Expect(back).To(Equal(payload))
			}
			Expect(hash).To(Equal("6669fa99"))
			Expect(paths).To(BeNil())
		},
		Entry("an empty payload is the empty string", []byte{}),
		Entry("a nil payload is the empty string", nil),
		Entry("a small payload", []byte(`{"ignition":{"version":"3.5.0"}}`)),
		Entry("a served payload", served(baseWorker().machineConfig(), "kubeconfig: token-1")),
		Entry("a payload over a megabyte", large),
	)

	It("writes the gzip header HyperShift writes: no name, no time, best-compression flag", func() {
		enc, err := hypershift.EncodePayload([]byte("x"))
		Expect(err).NotTo(HaveOccurred())
		raw, err := base64.StdEncoding.DecodeString(enc)
		Expect(err).NotTo(HaveOccurred())
		// ID1 ID2 CM FLG MTIME(4) XFL OS: XFL 2 is "maximum compression", OS 255 "unknown".
		Expect(raw[:10]).To(Equal([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 255}))
	})

	It("sets only its own keys, keeps the others, and reports no change when there is none", func() {
		paths := []hypershift.NoRebootPath{{Path: "/var/lib/kubelet/config.json", Action: "None"}}
		payload := []byte(`{"ignition":{"version":"3.5.0"}}`)
		cm, err := hypershift.BuildUpgradeConfigMap("workers", payload, "h1", paths)
		Expect(err).NotTo(HaveOccurred())
		cm.Data["someone-else"] = "kept"
		changed, err := hypershift.SetUpgradeConfigMapData(cm, payload, "h1", paths)
		Expect(err).NotTo(HaveOccurred())
		Expect(changed).To(BeFalse(), "same payload, same bytes: nothing to write")

		// The in-place upgrader replaces the whole map: no-reboot-paths goes.
		cm.Data = map[string]string{hypershift.KeyConfig: hyperShiftEncoding(payload), hypershift.KeyHash: "h1"}
		changed, err = hypershift.SetUpgradeConfigMapData(cm, payload, "h1", paths)
		Expect(err).NotTo(HaveOccurred())
		Expect(changed).To(BeTrue())
		Expect(cm.Data).To(HaveKeyWithValue(hypershift.KeyNoRebootPaths, `[{"path":"/var/lib/kubelet/config.json","action":"None"}]`))
		Expect(cm.Data[hypershift.KeyConfig]).To(Equal(hyperShiftEncoding(payload)), "config untouched")
	})

	It("takes the token Secret's payload as it is", func() {
		payload := served(baseWorker().machineConfig(), "kubeconfig")
		secret := &corev1.Secret{Data: map[string][]byte{hypershift.TokenSecretPayloadKey: []byte(hyperShiftEncoding(payload))}}
		got, err := hypershift.DecodePayload(string(secret.Data[hypershift.TokenSecretPayloadKey]))
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(Equal(payload))
	})

	It("makes the upgrade namespace with HyperShift's pod-security labels, keeping others", func() {
		ns := hypershift.UpgradeNamespace("workers")
		Expect(ns.Name).To(Equal("workers-upgrade"))
		Expect(ns.Labels).To(Equal(map[string]string{
			"pod-security.kubernetes.io/enforce": "privileged", "pod-security.kubernetes.io/audit": "privileged",
			"pod-security.kubernetes.io/warn": "privileged", "security.openshift.io/scc.podSecurityLabelSync": "false",
		}))
		Expect(hypershift.SetUpgradeNamespaceLabels(ns)).To(BeFalse())
		ns.Labels["pod-security.kubernetes.io/warn"] = "restricted"
		ns.Labels["team"] = "a"
		Expect(hypershift.SetUpgradeNamespaceLabels(ns)).To(BeTrue())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/warn", "privileged"))
		Expect(ns.Labels).To(HaveKeyWithValue("team", "a"))
		Expect(hypershift.DaemonPodName("ip-10-0-1-2")).To(Equal("machine-config-daemon-ip-10-0-1-2"))
	})

	DescribeTable("reads an in-place upgrade from the MachineSet",
		func(annotations map[string]string, inProgress bool) {
			Expect(hypershift.InPlaceUpgradeInProgress(annotations)).To(Equal(inProgress))
		},
		Entry("a Replace pool's MachineSet has no target", map[string]string{}, false),
		Entry("at its target", map[string]string{hypershift.MachineSetTargetConfigVersionAnnotation: "a", hypershift.MachineSetCurrentConfigVersionAnnotation: "a"}, false),
		Entry("a new target", map[string]string{hypershift.MachineSetTargetConfigVersionAnnotation: "b", hypershift.MachineSetCurrentConfigVersionAnnotation: "a"}, true),
		Entry("a target and no current yet", map[string]string{hypershift.MachineSetTargetConfigVersionAnnotation: "b"}, true),
		Entry("the in-progress annotation", map[string]string{hypershift.MachineSetUpgradeInProgressTrueAnnotation: "Nodepool update in progress"}, true),
	)

	It("converts the refresh conditions to NodePool conditions", func() {
		t := metav1.Now()
		got := hypershift.NodePoolConditions([]metav1.Condition{
			{Type: pool.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "RefreshFailed", Message: "1 node(s) failed", LastTransitionTime: t},
		}, 7)
		Expect(got).To(Equal([]hypershift.NodePoolCondition{{
			Type: pool.ConditionDegraded, Status: corev1.ConditionTrue, Reason: "RefreshFailed", Message: "1 node(s) failed", LastTransitionTime: t, ObservedGeneration: 7,
		}}))
	})
})
