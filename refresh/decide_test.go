package refresh_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

var (
	defaults     = refresh.DefaultPolicies()
	reloadCrio   = refresh.Action{Type: refresh.ActionReload, Unit: "crio.service"}
	restartCrio  = refresh.Action{Type: refresh.ActionRestart, Unit: "crio.service"}
	restartKubel = refresh.Action{Type: refresh.ActionRestart, Unit: "kubelet.service"}
	daemonReload = refresh.Action{Type: refresh.ActionDaemonReload}
	drain        = refresh.Action{Type: refresh.ActionDrain}
)

const registriesV1 = `unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]

[[registry]]
  prefix = ""
  location = "quay.io/openshift-release-dev/ocp-release"

  [[registry.mirror]]
    location = "mirror-a.example.com/ocp-release"
`

var _ = Describe("Decide with the cluster default policies", func() {
	DescribeTable("a change of one file",
		func(path string, outcome refresh.Outcome, actions []refresh.Action) {
			old := config(withFile(path, b64("v1\n"), 0o644))
			res := decide(old, config(withFile(path, b64("v2\n"), 0o644)), defaults)
			Expect(res.Outcome).To(Equal(outcome), "%+v", res.Changes)
			Expect(res.Actions).To(Equal(actions))
		},
		Entry("kubelet pull secret: None", "/var/lib/kubelet/config.json", refresh.InPlace, []refresh.Action{}),
		Entry("registries.d: Reload crio", "/etc/containers/registries.d/sigstore.yaml", refresh.InPlace, []refresh.Action{reloadCrio}),
		Entry("policy.json: Reload crio", "/etc/containers/policy.json", refresh.InPlace, []refresh.Action{reloadCrio}),
		Entry("crio policies: Reload crio", "/etc/crio/policies/openshift.json", refresh.InPlace, []refresh.Action{reloadCrio}),
		Entry("containers gpg key: Reload crio", "/etc/machine-config-daemon/no-reboot/containers-gpg.pub", refresh.InPlace, []refresh.Action{reloadCrio}),
		Entry("nmstate: None", "/etc/nmstate/openshift/cluster.yml", refresh.InPlace, []refresh.Action{}),
		Entry("user CA bundle: restart update-ca-trust then crio", "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt", refresh.InPlace,
			[]refresh.Action{{Type: refresh.ActionRestart, Unit: "coreos-update-ca-trust.service"}, restartCrio}),
		Entry("credential providers: Restart kubelet", "/etc/kubernetes/credential-providers/ecr.yaml", refresh.InPlace, []refresh.Action{restartKubel}),
		Entry("kubelet drop-in: DaemonReload then Restart kubelet", "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf", refresh.InPlace, []refresh.Action{daemonReload, restartKubel}),
		Entry("an unmatched file: Reboot", "/etc/motd", refresh.Reboot, []refresh.Action{}),
		Entry("a sibling with a shared prefix is not below: Reboot", "/etc/crio/policies.bak", refresh.Reboot, []refresh.Action{}),
	)

	It("treats the same bytes in another encoding as no change", func() {
		contents := "line one\nline two with spaces & symbols %/?\n"
		old := config(withFile("/etc/motd", b64(contents), 0o644))
		for _, next := range []refresh.Config{config(withFile("/etc/motd", pct(contents), 0o644)), config(withGzipFile("/etc/motd", contents))} {
			res := decide(old, next, defaults)
			Expect(res.Outcome).To(Equal(refresh.NoChange))
			Expect(res.Changes).To(BeEmpty())
		}
	})

	It("counts a mode-only change, decided by the policy", func() {
		res := decide(config(withFile("/etc/containers/policy.json", b64("{}"), 0o644)), config(withFile("/etc/containers/policy.json", b64("{}"), 0o600)), defaults)
		Expect(res.Outcome).To(Equal(refresh.InPlace))
		Expect(res.Changes).To(ConsistOf(HaveField("Name", "/etc/containers/policy.json")))
	})

	DescribeTable("deletions",
		func(path string, outcome refresh.Outcome) {
			res := decide(config(withFile(path, b64("x"), 0o644)), config(), defaults)
			Expect(res.Outcome).To(Equal(outcome))
		},
		Entry("under a policy", "/etc/containers/registries.d/a.yaml", refresh.InPlace),
		Entry("unmatched", "/etc/motd", refresh.Reboot),
	)

	DescribeTable("changes that always reboot, whatever the policies",
		func(mutate cfgOpt) {
			res := decide(config(), config(mutate), defaults)
			Expect(res.Outcome).To(Equal(refresh.Reboot))
			Expect(res.Actions).To(BeEmpty())
		},
		Entry("OS image", cfgOpt(func(c *refresh.Spec) { c.OSImageURL = "quay.io/openshift/rhcos@sha256:bbb" })),
		Entry("kernel arguments", cfgOpt(func(c *refresh.Spec) { c.KernelArguments = []string{"nosmt"} })),
		Entry("kernel type", cfgOpt(func(c *refresh.Spec) { c.KernelType = "realtime" })),
		Entry("extensions", cfgOpt(func(c *refresh.Spec) { c.Extensions = []string{"usbguard"} })),
	)

	DescribeTable("changes that cannot be applied",
		func(old, new cfgOpt) {
			res := decide(config(old), config(new), defaults)
			Expect(res.Outcome).To(Equal(refresh.Reject), "%+v", res.Changes)
		},
		Entry("FIPS", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) { c.FIPS = true })),
		Entry("a directory", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) {
			c.Ignition.Storage.Directories = []ign.Directory{{Node: ign.Node{Path: "/etc/foo"}}}
		})),
		Entry("an added link", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) {
			c.Ignition.Storage.Links = []ign.Link{{Node: ign.Node{Path: "/etc/foo"}, LinkEmbedded1: ign.LinkEmbedded1{Target: ptr("/etc/bar")}}}
		})),
		Entry("append", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) {
			c.Ignition.Storage.Files = []ign.File{{Node: ign.Node{Path: "/var/lib/kubelet/config.json"}, FileEmbedded1: ign.FileEmbedded1{Append: []ign.Resource{{Source: ptr(b64("x"))}}}}}
		})),
		Entry("Ignition kernelArguments", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) {
			c.Ignition.KernelArguments.ShouldExist = []ign.KernelArgument{"nosmt"}
		})),
		Entry("a user other than core", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) {
			c.Ignition.Passwd.Users = []ign.PasswdUser{{Name: "admin"}}
		})),
		Entry("a group", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) {
			c.Ignition.Passwd.Groups = []ign.PasswdGroup{{Name: "wheel2"}}
		})),
		Entry("a filesystem", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) {
			c.Ignition.Storage.Filesystems = []ign.Filesystem{{Device: "/dev/sdb", Format: ptr("xfs")}}
		})),
		Entry("a disk", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) {
			c.Ignition.Storage.Disks = []ign.Disk{{Device: "/dev/sdb", WipeTable: ptr(true)}}
		})),
		Entry("RAID", cfgOpt(func(*refresh.Spec) {}), cfgOpt(func(c *refresh.Spec) {
			c.Ignition.Storage.Raid = []ign.Raid{{Name: "md0", Level: ptr("raid1"), Devices: []ign.Device{"/dev/sdb", "/dev/sdc"}}}
		})),
	)

	It("applies core's ssh keys in place, with no action", func() {
		res := decide(config(withSSHKeys("ssh-ed25519 AAAA old")), config(withSSHKeys("ssh-ed25519 AAAA old", "ssh-ed25519 BBBB new")), defaults)
		Expect(res.Outcome).To(Equal(refresh.InPlace))
		Expect(res.Changes).To(ConsistOf(And(HaveField("Kind", refresh.KindSSHKey), HaveField("Rule", "sshkey policy (core's ssh keys): None"))))
		Expect(res.Actions).To(BeEmpty())
	})

	It("reboots for a unit without a policy, including its drop-ins", func() {
		res := decide(config(withUnit("kubelet.service", "[Unit]")), config(withUnit("kubelet.service", "[Unit]", ign.Dropin{Name: "10-x.conf", Contents: ptr("[Service]")})), defaults)
		Expect(res.Outcome).To(Equal(refresh.Reboot))
		Expect(res.Changes).To(ConsistOf(HaveField("Rule", "no unit policy for kubelet.service")))
	})

	It("lets the worst change decide a mix", func() {
		res := decide(config(), config(withFile("/etc/containers/policy.json", b64("{}"), 0o644), withFile("/etc/motd", b64("hi"), 0o644)), defaults)
		Expect(res.Outcome).To(Equal(refresh.Reboot))
		Expect(res.Changes).To(HaveLen(2))
	})

	Describe("registries.conf", func() {
		decideRegistries := func(old, new string) refresh.Result {
			return decide(config(withFile(refresh.RegistriesConf, pct(old), 0o644)), config(withFile(refresh.RegistriesConf, pct(new), 0o644)), defaults)
		}
		It("reloads crio without a drain when a digest-only mirror is added", func() {
			res := decideRegistries(registriesV1, registriesV1+"\n  [[registry.mirror]]\n    location = \"mirror-b.example.com/ocp-release\"\n    pull-from-mirror = \"digest-only\"\n")
			Expect(res.Actions).To(Equal([]refresh.Action{reloadCrio}))
		})
		It("drains first when a mirror that is not digest-only is added", func() {
			res := decideRegistries(registriesV1, registriesV1+"\n  [[registry.mirror]]\n    location = \"mirror-b.example.com/ocp-release\"\n")
			Expect(res.Actions).To(Equal([]refresh.Action{drain, reloadCrio}))
			Expect(res.Changes[0].Rule).To(ContainSubstring("mirror mirror-b.example.com/ocp-release added without pull-from-mirror"))
		})
		It("drains first when a mirror is removed", func() {
			res := decideRegistries(registriesV1, `unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]
[[registry]]
  prefix = ""
  location = "quay.io/openshift-release-dev/ocp-release"
`)
			Expect(res.Outcome).To(Equal(refresh.InPlace))
			Expect(res.Actions).To(Equal([]refresh.Action{drain, reloadCrio}))
			Expect(res.Changes[0].Rule).To(ContainSubstring("with Drain (registry quay.io/openshift-release-dev/ocp-release: mirror mirror-a.example.com/ocp-release removed)"))
		})
		It("does not drain when mirrors are only reordered, as the MCO", func() {
			two := registriesV1 + "\n  [[registry.mirror]]\n    location = \"mirror-b.example.com/ocp-release\"\n"
			swapped := `unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]
[[registry]]
  prefix = ""
  location = "quay.io/openshift-release-dev/ocp-release"
  [[registry.mirror]]
    location = "mirror-b.example.com/ocp-release"
  [[registry.mirror]]
    location = "mirror-a.example.com/ocp-release"
`
			Expect(decideRegistries(two, swapped).Actions).To(Equal([]refresh.Action{reloadCrio}))
		})
		It("loads a registries.conf larger than a pipe holds", func() {
			big := strings.Repeat("# a long comment line to fill the pipe's buffer\n", 8000) + registriesV1
			Expect(decideRegistries(registriesV1, big).Actions).To(Equal([]refresh.Action{reloadCrio}))
			Expect(decideRegistries(registriesV1, "short-name-mode = 3\n"+big).Outcome).To(Equal(refresh.Reject))
		})
		It("refuses contents crio cannot load, naming which version", func() {
			res := decideRegistries(registriesV1, "[[registry]\n")
			Expect(res.Outcome).To(Equal(refresh.Reject))
			Expect(res.Changes[0].Rule).To(ContainSubstring("the new /etc/containers/registries.conf cannot be loaded by crio: toml: line 2"))
		})

		// The MCO reads the current file only to decide whether to drain
		// (isDrainRequiredForNodeDisruptionActions, isDrainRequired): a reboot or a Drain policy
		// drains without looking, so the update is applied; otherwise the read fails the update.
		Describe("whose current version cannot be read, replaced by a valid one", func() {
			unreadable := withFile(refresh.RegistriesConf, pct("[[registry]\n"), 0o644)
			valid := withFile(refresh.RegistriesConf, pct(registriesV1), 0o644)
			It("is applied when another change reboots", func() {
				res := decide(config(unreadable), config(valid, func(c *refresh.Spec) { c.KernelArguments = []string{"nosmt"} }), defaults)
				Expect(res.Outcome).To(Equal(refresh.Reboot))
				Expect(res.Changes).To(ContainElement(And(HaveField("Name", refresh.RegistriesConf), HaveField("Decision", refresh.InPlace),
					HaveField("Rule", ContainSubstring("the current /etc/containers/registries.conf cannot be read")),
					HaveField("Rule", HaveSuffix("applied, since the node drains anyway for another change")))))
			})
			It("is applied when another change's policy drains", func() {
				policies := defaults.DeepCopy()
				policies.Files = append(policies.Files, operatorv1.NodeDisruptionPolicyStatusFile{Path: "/etc/app.conf",
					Actions: []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.DrainStatusAction}}})
				res := decide(config(unreadable), config(valid, withFile("/etc/app.conf", b64("x"), 0o644)), *policies)
				Expect(res.Outcome).To(Equal(refresh.InPlace))
				Expect(res.Actions).To(Equal([]refresh.Action{drain, reloadCrio}))
			})
			It("is refused when nothing else drains, as the daemon fails it", func() {
				res := decide(config(unreadable), config(valid), defaults)
				Expect(res.Outcome).To(Equal(refresh.Reject))
				Expect(res.Actions).To(BeEmpty())
				Expect(res.Changes[0].Rule).To(HaveSuffix("so the daemon cannot tell whether a drain is needed and fails the update"))
			})
		})
	})
})

var _ = Describe("User policies", func() {
	user := operatorv1.NodeDisruptionPolicyConfig{
		Files: []operatorv1.NodeDisruptionPolicySpecFile{
			{Path: "/etc/app", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.ReloadSpecAction, Reload: &operatorv1.ReloadService{ServiceName: "app.service"}}}},
			{Path: "/etc/app/certs", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.RestartSpecAction, Restart: &operatorv1.RestartService{ServiceName: "app.service"}}}},
			{Path: "/etc/containers/policy.json", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.RebootSpecAction}}},
		},
		Units: []operatorv1.NodeDisruptionPolicySpecUnit{{Name: "app.service", Actions: []operatorv1.NodeDisruptionPolicySpecAction{
			{Type: operatorv1.DaemonReloadSpecAction}, {Type: operatorv1.ReloadSpecAction, Reload: &operatorv1.ReloadService{ServiceName: "crio.service"}},
		}}},
		SSHKey: operatorv1.NodeDisruptionPolicySpecSSHKey{Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.DrainSpecAction}}},
	}
	var policies refresh.Policies
	BeforeEach(func() {
		var err error
		policies, err = refresh.MergePolicies(user)
		Expect(err).NotTo(HaveOccurred())
	})

	It("replaces the default of the same path and adds the rest", func() {
		Expect(policies.Files).To(HaveLen(len(refresh.DefaultPolicies().Files) + 2))
		res := decide(config(withFile("/etc/containers/policy.json", b64("{}"), 0o644)), config(withFile("/etc/containers/policy.json", b64(`{"default":[]}`), 0o644)), policies)
		Expect(res.Outcome).To(Equal(refresh.Reboot))
	})

	It("matches any depth below a policy path, the longest path winning", func() {
		res := decide(config(), config(withFile("/etc/app/certs/deep/tls.crt", b64("x"), 0o644)), policies)
		Expect(res.Actions).To(Equal([]refresh.Action{{Type: refresh.ActionRestart, Unit: "app.service"}}))
		res = decide(config(), config(withFile("/etc/app/app.conf", b64("x"), 0o644)), policies)
		Expect(res.Actions).To(Equal([]refresh.Action{{Type: refresh.ActionReload, Unit: "app.service"}}))
	})

	It("runs the actions in policy order, every one, a shared one merged, Drain first", func() {
		res := decide(config(withUnit("app.service", "v1"), withSSHKeys("a")),
			config(withFile("/etc/app/app.conf", b64("x"), 0o644), withFile("/etc/app/certs/tls.crt", b64("x"), 0o644), withFile("/etc/containers/registries.d/x.yaml", b64("x"), 0o644),
				withFile("/etc/containers/registries.d/y.yaml", b64("x"), 0o644),
				withFile("/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf", b64("x"), 0o644),
				withUnit("app.service", "v2"), withSSHKeys("b")), policies)
		Expect(res.Outcome).To(Equal(refresh.InPlace), "%+v", res.Changes)
		Expect(res.Actions).To(Equal([]refresh.Action{
			drain,
			{Type: refresh.ActionReload, Unit: "app.service"},
			{Type: refresh.ActionRestart, Unit: "app.service"},
			reloadCrio,
			daemonReload, restartKubel,
			reloadCrio, // the unit policy's, after its DaemonReload

		}))
	})

	DescribeTable("validation",
		func(bad operatorv1.NodeDisruptionPolicyConfig, message string) {
			_, err := refresh.MergePolicies(bad)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("relative path", operatorv1.NodeDisruptionPolicyConfig{Files: []operatorv1.NodeDisruptionPolicySpecFile{{Path: "etc/x", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.NoneSpecAction}}}}}, `file policy "etc/x": the path must be absolute`),
		Entry("bad service", operatorv1.NodeDisruptionPolicyConfig{Units: []operatorv1.NodeDisruptionPolicySpecUnit{{Name: "crio", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.NoneSpecAction}}}}}, `invalid service name "crio"`),
		Entry("Reboot with others", operatorv1.NodeDisruptionPolicyConfig{SSHKey: operatorv1.NodeDisruptionPolicySpecSSHKey{Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.RebootSpecAction}, {Type: operatorv1.DrainSpecAction}}}}, "Reboot must be the only action"),
	)
})

var _ = Describe("Facts of the MCO's node disruption code", func() {
	appendFile := func(path string, appended ...string) cfgOpt {
		return func(c *refresh.Spec) {
			f := ign.File{Node: ign.Node{Path: path}}
			for _, a := range appended {
				f.Append = append(f.Append, ign.Resource{Source: ptr(pct(a))})
			}
			c.Ignition.Storage.Files = append(c.Ignition.Storage.Files, f)
		}
	}
	remoteFile := func(path, hash string) cfgOpt {
		return func(c *refresh.Spec) {
			c.Ignition.Storage.Files = append(c.Ignition.Storage.Files, ign.File{Node: ign.Node{Path: path}, FileEmbedded1: ign.FileEmbedded1{
				Contents: ign.Resource{Source: ptr("https://example.com/config"), Verification: ign.Verification{Hash: ptr(hash)}},
			}})
		}
	}
	link := func(path string) ign.Link {
		return ign.Link{Node: ign.Node{Path: path}, LinkEmbedded1: ign.LinkEmbedded1{Target: ptr("/etc/target")}}
	}
	withLinks := func(links ...ign.Link) cfgOpt {
		return func(c *refresh.Spec) { c.Ignition.Storage.Links = links }
	}
	kernel := func(t string) cfgOpt { return func(c *refresh.Spec) { c.KernelType = t } }
	extensions := func(e ...string) cfgOpt { return func(c *refresh.Spec) { c.Extensions = e } }

	DescribeTable("outcomes",
		func(old, new []cfgOpt, outcome refresh.Outcome, rule string) {
			res := decide(config(old...), config(new...), defaults)
			Expect(res.Outcome).To(Equal(outcome), "%+v", res.Changes)
			if rule != "" {
				Expect(res.Changes).To(ContainElement(HaveField("Rule", ContainSubstring(rule))))
			}
		},
		Entry("kernel type \"\" is \"default\"", []cfgOpt{kernel("")}, []cfgOpt{kernel("default")}, refresh.NoChange, ""),
		Entry("kernel type default to realtime reboots", []cfgOpt{kernel("")}, []cfgOpt{kernel("realtime")}, refresh.Reboot, "kernelType"),
		Entry("extensions reordered reboot, as the MCO compares them in order", []cfgOpt{extensions("a", "b")}, []cfgOpt{extensions("b", "a")}, refresh.Reboot, "extensions"),
		Entry("a changed append list is seen, and refused", []cfgOpt{appendFile("/etc/hosts", "a")}, []cfgOpt{appendFile("/etc/hosts", "b")}, refresh.Reject, "append"),
		Entry("an unchanged file with append is refused when anything else changes",
			[]cfgOpt{appendFile("/etc/hosts", "a"), withFile(pullSecretPath, b64("1"), 0o644)},
			[]cfgOpt{appendFile("/etc/hosts", "a"), withFile(pullSecretPath, b64("2"), 0o644)}, refresh.Reject, "append"),
		Entry("identical configs with an append file are no change", []cfgOpt{appendFile("/etc/hosts", "a")}, []cfgOpt{appendFile("/etc/hosts", "a")}, refresh.NoChange, ""),
		Entry("a remote source's verification hash change is a contents change",
			[]cfgOpt{remoteFile("/etc/motd", "sha512-aa")}, []cfgOpt{remoteFile("/etc/motd", "sha512-bb")}, refresh.Reboot, "no file policy matches /etc/motd"),
		Entry("the force file kept while something else changes is refused",
			[]cfgOpt{file(refresh.ForceFile, ""), file(pullSecretPath, "1")}, []cfgOpt{file(refresh.ForceFile, ""), file(pullSecretPath, "2")}, refresh.Reject, "/run/machine-config-daemon-force cannot be written by a config"),
		Entry("every link removed: allowed, no action", []cfgOpt{withLinks(link("/etc/a"), link("/etc/b"))}, nil, refresh.InPlace, "links may be removed when none remain"),
		Entry("one link removed while another remains: refused", []cfgOpt{withLinks(link("/etc/a"), link("/etc/b"))}, []cfgOpt{withLinks(link("/etc/a"))}, refresh.Reject, "nor removed while others remain"),
		Entry("a removed user other than core is for the sshkey policy (its password is cleared)",
			[]cfgOpt{withUsers(ign.PasswdUser{Name: "admin", PasswordHash: ptr("x")})}, nil, refresh.InPlace, "sshkey policy (user admin removed"),
		Entry("an unchanged user other than core is refused when users change",
			[]cfgOpt{withUsers(ign.PasswdUser{Name: "admin"}, ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("a")})},
			[]cfgOpt{withUsers(ign.PasswdUser{Name: "admin"}, ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("b")})}, refresh.Reject, "only user core can be configured"),
		Entry("core's password alone is enough", []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("a")})},
			[]cfgOpt{withUsers(ign.PasswdUser{Name: "core", PasswordHash: ptr("$6$x")})}, refresh.InPlace, "sshkey policy (core's password hash)"),
		Entry("core left with neither key nor password is refused", []cfgOpt{withUsers(ign.PasswdUser{Name: "core", PasswordHash: ptr("$6$x")})},
			[]cfgOpt{withUsers(ign.PasswdUser{Name: "core"})}, refresh.Reject, "core must keep at least one ssh key or a password hash"),
		Entry("a new IRI registry file restarts iri-registry (a 2026 default)", nil, []cfgOpt{file("/etc/iri-registry/config.yml", "x")}, refresh.InPlace, "file policy /etc/iri-registry: Restart"),
		Entry("the IRI unit has a default policy", []cfgOpt{withUnit("iri-registry.service", "a")}, []cfgOpt{withUnit("iri-registry.service", "b")}, refresh.InPlace, "unit policy iri-registry.service: DaemonReload, Restart"),
	)

	It("refuses a gzip bomb in a file's contents, naming the file and the bound", func() {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, err := zw.Write(make([]byte, refresh.MaxDecompressedBytes+1))
		Expect(err).NotTo(HaveOccurred())
		Expect(zw.Close()).To(Succeed())
		bomb := func(c *refresh.Spec) {
			c.Ignition.Storage.Files = append(c.Ignition.Storage.Files, ign.File{Node: ign.Node{Path: "/etc/bomb"}, FileEmbedded1: ign.FileEmbedded1{
				Contents: ign.Resource{Source: ptr("data:;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())), Compression: ptr("gzip")},
			}})
		}
		_, err = refresh.Diff(config(), config(bomb))
		Expect(err).To(MatchError("file /etc/bomb: contents: gzip data expands to more than 64 MiB"))
	})

	It("cleans policy paths: /etc/app/ is the folder /etc/app, and replaces a policy of the same cleaned path", func() {
		policies, err := refresh.MergePolicies(operatorv1.NodeDisruptionPolicyConfig{Files: []operatorv1.NodeDisruptionPolicySpecFile{
			{Path: "/etc/app/", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.NoneSpecAction}}},
			{Path: "/etc/containers/policy.json/", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.RebootSpecAction}}},
		}})
		Expect(err).NotTo(HaveOccurred())
		Expect(policies.Files).To(HaveLen(len(defaults.Files) + 1))
		Expect(decide(config(), config(file("/etc/app/a.conf", "x")), policies).Outcome).To(Equal(refresh.InPlace))
		Expect(decide(config(), config(file("/etc/containers/policy.json", "x")), policies).Outcome).To(Equal(refresh.Reboot))
	})

	It("keeps the MCO's order when merging: defaults first, a replaced one in place, the user's after", func() {
		policies, err := refresh.MergePolicies(operatorv1.NodeDisruptionPolicyConfig{
			Files: []operatorv1.NodeDisruptionPolicySpecFile{
				{Path: "/etc/z", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.NoneSpecAction}}},
				{Path: "/etc/a", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.NoneSpecAction}}},
				{Path: "/var/lib/kubelet/config.json", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.DrainSpecAction}}},
			},
			Units: []operatorv1.NodeDisruptionPolicySpecUnit{{Name: "iri-registry.service", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.NoneSpecAction}}}},
		})
		Expect(err).NotTo(HaveOccurred())
		n := len(policies.Files)
		Expect(policies.Files[0].Path).To(Equal("/var/lib/kubelet/config.json"))
		Expect(policies.Files[0].Actions).To(Equal([]operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.DrainStatusAction}}))
		Expect([]string{policies.Files[n-2].Path, policies.Files[n-1].Path}).To(Equal([]string{"/etc/z", "/etc/a"}))
		Expect(policies.Units).To(Equal([]operatorv1.NodeDisruptionPolicyStatusUnit{{Name: "iri-registry.service", Actions: []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.NoneStatusAction}}}}))
	})
})
