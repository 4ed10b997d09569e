package refresh_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

var _ = Describe("The HyperShift push", func() {
	It("round-trips the upgrade ConfigMap", func() {
		payload := ignitionJSON(config(withFile("/etc/motd", b64("hello"), 0o644)))
		paths := refresh.NoRebootPathsFromPolicies(defaults)
		cm, err := refresh.BuildUpgradeConfigMap("workers", payload, "abc123", paths)
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Namespace).To(Equal("workers-upgrade"))
		Expect(cm.Name).To(Equal("workers-upgrade"))
		gotPayload, hash, gotPaths, err := refresh.ParseUpgradeConfigMap(cm)
		Expect(err).NotTo(HaveOccurred())
		Expect(gotPayload).To(Equal(payload))
		Expect(hash).To(Equal("abc123"))
		Expect(gotPaths).To(Equal(paths))
	})

	It("says what is wrong with a broken ConfigMap", func() {
		cm, _ := refresh.BuildUpgradeConfigMap("workers", []byte("{}"), "h", nil)
		cm.Data[refresh.KeyConfig] = "!!!"
		_, _, _, err := refresh.ParseUpgradeConfigMap(cm)
		Expect(err).To(MatchError(ContainSubstring("ConfigMap workers-upgrade/workers-upgrade key config is not base64")))
	})

	It("generates no-reboot-paths from the policies it can express, as files and folders", func() {
		paths := refresh.NoRebootPathsFromPolicies(defaults)
		Expect(paths).To(ContainElements(
			refresh.NoRebootPath{Path: "/etc/containers/registries.d", Action: "Reload", Services: []string{"crio.service"}},
			refresh.NoRebootPath{Path: "/etc/containers/registries.d/", Action: "Reload", Services: []string{"crio.service"}},
			refresh.NoRebootPath{Path: "/var/lib/kubelet/config.json", Action: "None"},
			refresh.NoRebootPath{Path: "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt", Action: "Restart", Services: []string{"coreos-update-ca-trust.service", "crio.service"}},
		))
		for _, p := range paths {
			Expect(strings.TrimSuffix(p.Path, "/")).NotTo(Equal(refresh.RegistriesConf), "Special is not expressible")
			Expect(p.Path).NotTo(ContainSubstring("40-kubelet-crio-image-credential-provider"), "DaemonReload is not expressible")
		}
	})

	It("generates clean paths, leaves out a policy for / (it matches no file) and keeps the first of a path listed twice", func() {
		policies := refresh.Policies{Files: []operatorv1.NodeDisruptionPolicyStatusFile{
			{Path: "/etc/app/", Actions: []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.NoneStatusAction}}},
			{Path: "/etc/app", Actions: []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.RebootStatusAction}}},
			{Path: "/", Actions: []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.NoneStatusAction}}},
		}}
		Expect(refresh.NoRebootPathsFromPolicies(policies)).To(Equal([]refresh.NoRebootPath{
			{Path: "/etc/app", Action: "None"}, {Path: "/etc/app/", Action: "None"},
		}))
	})

	It("refuses a config that decompresses beyond the bound, naming it", func() {
		cm, err := refresh.BuildUpgradeConfigMap("workers", make([]byte, refresh.MaxDecompressedBytes+1), "h", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(cm.Data[refresh.KeyConfig])).To(BeNumerically("<", 1<<20), "the bomb is small on the wire")
		_, _, _, err = refresh.ParseUpgradeConfigMap(cm)
		Expect(err).To(MatchError("ConfigMap workers-upgrade/workers-upgrade key config: gzip data expands to more than 64 MiB"))

		cm, err = refresh.BuildUpgradeConfigMap("workers", make([]byte, refresh.MaxDecompressedBytes), "h", nil)
		Expect(err).NotTo(HaveOccurred())
		payload, _, _, err := refresh.ParseUpgradeConfigMap(cm)
		Expect(err).NotTo(HaveOccurred(), "exactly the bound is fine")
		Expect(payload).To(HaveLen(refresh.MaxDecompressedBytes))
	})

	Describe("deciding with a received list", func() {
		allowed := refresh.AllowedServices(defaults)
		decideWith := func(old, new refresh.Config, paths []refresh.NoRebootPath) refresh.Result {
			GinkgoHelper()
			changes, err := refresh.Diff(old, new)
			Expect(err).NotTo(HaveOccurred())
			return refresh.DecideWithNoRebootPaths(changes, defaults, paths, allowed)
		}
		motd := func(s string) refresh.Config { return config(withFile("/etc/motd", b64(s), 0o644)) }

		It("relaxes a file the list names", func() {
			res := decideWith(motd("a"), motd("b"), []refresh.NoRebootPath{{Path: "/etc/motd", Action: "None"}})
			Expect(res.Outcome).To(Equal(refresh.InPlace))
		})

		It("matches below a folder entry and normalises services", func() {
			res := decideWith(config(), config(withFile("/etc/pki/ca-trust/source/anchors/extra.crt", b64("x"), 0o644)),
				[]refresh.NoRebootPath{{Path: "/etc/pki/ca-trust/source/anchors/", Action: "Restart", Services: []string{"update-ca-trust", "crio"}}})
			Expect(res.Actions).To(Equal([]refresh.Action{{Type: refresh.ActionRestart, Unit: "coreos-update-ca-trust.service"}, restartCrio}))
		})

		DescribeTable("tampered or hostile entries still reboot or reject",
			func(old, new refresh.Config, paths []refresh.NoRebootPath, outcome refresh.Outcome) {
				Expect(decideWith(old, new, paths).Outcome).To(Equal(outcome))
			},
			Entry("a kernel argument change listed as a path", config(), config(func(c *refresh.Spec) { c.KernelArguments = []string{"mitigations=off"} }),
				[]refresh.NoRebootPath{{Path: "/", Action: "None"}, {Path: "/proc/cmdline", Action: "None"}}, refresh.Reboot),
			Entry("an OS image change", config(), config(func(c *refresh.Spec) { c.OSImageURL = "quay.io/evil@sha256:1" }),
				[]refresh.NoRebootPath{{Path: "/", Action: "None"}}, refresh.Reboot),
			Entry("a service outside the allowlist", motd("a"), motd("b"),
				[]refresh.NoRebootPath{{Path: "/etc/motd", Action: "Restart", Services: []string{"sshd"}}}, refresh.Reboot),
			Entry("a shell command as a service", motd("a"), motd("b"),
				[]refresh.NoRebootPath{{Path: "/etc/motd", Action: "Restart", Services: []string{"crio; rm -rf /"}}}, refresh.Reboot),
			Entry("a relative path", motd("a"), motd("b"), []refresh.NoRebootPath{{Path: "etc/motd", Action: "None"}}, refresh.Reboot),
			Entry("a path with ..", motd("a"), motd("b"), []refresh.NoRebootPath{{Path: "/etc/x/../motd", Action: "None"}}, refresh.Reboot),
			Entry("an unknown action", motd("a"), motd("b"), []refresh.NoRebootPath{{Path: "/etc/motd", Action: "Exec", Services: []string{"crio"}}}, refresh.Reboot),
			Entry("None with services", motd("a"), motd("b"), []refresh.NoRebootPath{{Path: "/etc/motd", Action: "None", Services: []string{"crio"}}}, refresh.Reboot),
			Entry("Restart without services", motd("a"), motd("b"), []refresh.NoRebootPath{{Path: "/etc/motd", Action: "Restart"}}, refresh.Reboot),
			Entry("a directory under a root entry", config(), config(func(c *refresh.Spec) {
				c.Ignition.Storage.Directories = append(c.Ignition.Storage.Directories, dir("/etc/x"))
			}), []refresh.NoRebootPath{{Path: "/", Action: "None"}}, refresh.Reject),
		)
	})
})
