package refresh_test

import (
	"encoding/json"
	"fmt"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// Test cases ported from the MCO (openshift/machine-config-operator at 7ff337a4, 2026-08-20): each
// row names the upstream test and case. The upstream tests check the daemon's pieces one by one
// (reconcilable, the diff, the actions, the drain); a row checks the same fact through Diff and
// Decide. Where the upstream case tests the pre-policy path (used only on first boot), the row
// says what the node disruption policies decide instead.

// mcoCase is one ported case: a config change, the policies (the defaults when nil) and the decision.
type mcoCase struct {
	old, new []cfgOpt
	policies *refresh.Policies
	// storageOverrides are MachineConfiguration spec.irreconcilableValidationOverrides.storage,
	// which only DecideMachineConfigs takes.
	storageOverrides []operatorv1.IrreconcilableValidationOverridesStorage
	outcome          refresh.Outcome
	actions          []refresh.Action
}

func checkMCOCase(c mcoCase) {
	policies := defaults
	if c.policies != nil {
		policies = *c.policies
	}
	actions := c.actions
	if actions == nil {
		actions = []refresh.Action{}
	}
	if c.storageOverrides == nil {
		res := decide(config(c.old...), config(c.new...), policies)
		Expect(res.Outcome).To(Equal(c.outcome), "%+v", res.Changes)
		Expect(res.Actions).To(Equal(actions), "%+v", res.Changes)
		for _, ch := range res.Changes {
			Expect(ch.Rule).NotTo(Or(BeEmpty(), HaveSuffix(" "), ContainSubstring("  ")), "the rule names what it decides, without stray spaces")
		}
	}

	// The daemon's one call, on the two MachineConfigs it would hold, answers the same.
	oldMC, newMC := machineConfig("rendered-worker-old", c.old...), machineConfig("rendered-worker-new", c.new...)
	mcRes, err := refresh.DecideMachineConfigs(oldMC, newMC, policies, c.storageOverrides...)
	Expect(err).NotTo(HaveOccurred())
	Expect(mcRes.Outcome).To(Equal(c.outcome), "DecideMachineConfigs: %+v", mcRes.Changes)
	Expect(mcRes.Actions).To(Equal(actions), "DecideMachineConfigs: %+v", mcRes.Changes)
}

// machineConfig is the rendered MachineConfig holding config(opts...), its Ignition config as
// JSON in spec.config, as the daemon reads it from the API.
func machineConfig(name string, opts ...cfgOpt) *mcfgv1.MachineConfig {
	GinkgoHelper()
	s := refresh.SpecOf(config(opts...))
	raw, err := json.Marshal(s.Ignition)
	Expect(err).NotTo(HaveOccurred())
	return &mcfgv1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: mcfgv1.MachineConfigSpec{
			OSImageURL: s.OSImageURL, KernelArguments: s.KernelArguments, FIPS: s.FIPS,
			KernelType: s.KernelType, Extensions: s.Extensions, Config: runtime.RawExtension{Raw: raw},
		},
	}
}

func withUsers(users ...ign.PasswdUser) cfgOpt {
	return func(c *refresh.Spec) { c.Ignition.Passwd.Users = append(c.Ignition.Passwd.Users, users...) }
}

func keys(ks ...string) []ign.SSHAuthorizedKey {
	out := make([]ign.SSHAuthorizedKey, len(ks))
	for i, k := range ks {
		out[i] = ign.SSHAuthorizedKey(k)
	}
	return out
}

func withMC(mutate func(*refresh.Spec)) cfgOpt { return mutate }

func withRegistries(toml string) cfgOpt { return withFile(refresh.RegistriesConf, pct(toml), 0o644) }

// mergedPolicies merges user policies into the defaults, failing the spec on an error.
func mergedPolicies(user operatorv1.NodeDisruptionPolicyConfig) *refresh.Policies {
	p, err := refresh.MergePolicies(user)
	Expect(err).NotTo(HaveOccurred())
	return &p
}

func specReload(unit string) operatorv1.NodeDisruptionPolicySpecAction {
	return operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.ReloadSpecAction, Reload: &operatorv1.ReloadService{ServiceName: operatorv1.NodeDisruptionPolicyServiceName(unit)}}
}

func specRestart(unit string) operatorv1.NodeDisruptionPolicySpecAction {
	return operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.RestartSpecAction, Restart: &operatorv1.RestartService{ServiceName: operatorv1.NodeDisruptionPolicyServiceName(unit)}}
}

func specAction(t operatorv1.NodeDisruptionPolicySpecActionType) operatorv1.NodeDisruptionPolicySpecAction {
	return operatorv1.NodeDisruptionPolicySpecAction{Type: t}
}

var _ = Describe("Cases ported from the MCO's reconcile_test.go", func() {
	DescribeTable("pkg/controller/common/reconcile_test.go", checkMCOCase,
		Entry("TestIsRenderedConfigReconcilable Disk: a disks change is refused", mcoCase{
			old:     []cfgOpt{withMC(func(c *refresh.Spec) { c.Ignition.Storage.Disks = []ign.Disk{{Device: "/one"}} })},
			outcome: refresh.Reject,
		}),
		Entry("TestIsRenderedConfigReconcilable Filesystem: a filesystems change is refused", mcoCase{
			old: []cfgOpt{withMC(func(c *refresh.Spec) {
				c.Ignition.Storage.Filesystems = []ign.Filesystem{{Device: "/dev/sda1", Format: ptr("ext4"), Path: ptr("/foo/bar")}}
			})},
			outcome: refresh.Reject,
		}),
		Entry("TestIsRenderedConfigReconcilable Raid: a RAID change is refused", mcoCase{
			old: []cfgOpt{withMC(func(c *refresh.Spec) {
				c.Ignition.Storage.Raid = []ign.Raid{{Name: "data", Level: ptr("stripe"), Devices: []ign.Device{"/dev/vda", "/dev/vdb"}}}
			})},
			outcome: refresh.Reject,
		}),
		Entry("TestIsRenderedConfigReconcilable Disk: a disks change is allowed if an override is given", mcoCase{
			old:              []cfgOpt{withMC(func(c *refresh.Spec) { c.Ignition.Storage.Disks = []ign.Disk{{Device: "/one"}} })},
			storageOverrides: []operatorv1.IrreconcilableValidationOverridesStorage{operatorv1.IrreconcilableValidationOverridesStorageDisks},
			outcome:          refresh.InPlace,
		}),
		Entry("TestIsRenderedConfigReconcilable Filesystem: a filesystems change is allowed if an override is given", mcoCase{
			old: []cfgOpt{withMC(func(c *refresh.Spec) {
				c.Ignition.Storage.Filesystems = []ign.Filesystem{{Device: "/dev/sda1", Format: ptr("ext4"), Path: ptr("/foo/bar")}}
			})},
			storageOverrides: []operatorv1.IrreconcilableValidationOverridesStorage{operatorv1.IrreconcilableValidationOverridesStorageFileSystems},
			outcome:          refresh.InPlace,
		}),
		Entry("TestIsRenderedConfigReconcilable Raid: a RAID change is allowed if an override is given", mcoCase{
			old: []cfgOpt{withMC(func(c *refresh.Spec) {
				c.Ignition.Storage.Raid = []ign.Raid{{Name: "data", Level: ptr("stripe"), Devices: []ign.Device{"/dev/vda", "/dev/vdb"}}}
			})},
			storageOverrides: []operatorv1.IrreconcilableValidationOverridesStorage{operatorv1.IrreconcilableValidationOverridesStorageRaid},
			outcome:          refresh.InPlace,
		}),
		Entry("an override of another section lets a disks change through no more", mcoCase{
			old:              []cfgOpt{withMC(func(c *refresh.Spec) { c.Ignition.Storage.Disks = []ign.Disk{{Device: "/one"}} })},
			storageOverrides: []operatorv1.IrreconcilableValidationOverridesStorage{operatorv1.IrreconcilableValidationOverridesStorageRaid},
			outcome:          refresh.Reject,
		}),
		Entry("TestIsRenderedConfigReconcilable PasswdGroups: adding a group is refused", mcoCase{
			new:     []cfgOpt{withMC(func(c *refresh.Spec) { c.Ignition.Passwd.Groups = []ign.PasswdGroup{{Name: "testGroup"}} })},
			outcome: refresh.Reject,
		}),
		Entry("TestIsRenderedConfigReconcilable KernelArguments: Ignition kernel arguments are refused", mcoCase{
			new: []cfgOpt{withMC(func(c *refresh.Spec) {
				c.Ignition.KernelArguments = ign.KernelArguments{ShouldExist: []ign.KernelArgument{"foo=bar"}, ShouldNotExist: []ign.KernelArgument{"baz=foo"}}
			})},
			outcome: refresh.Reject,
		}),
		Entry("TestIsRenderedConfigReconcilable LuksClevisTang: a Tang change is accepted, with no action", mcoCase{
			old: []cfgOpt{withMC(func(c *refresh.Spec) {
				c.Ignition.Storage.Luks = []ign.Luks{{Name: "luks-tang", Device: ptr("/dev/sdb"), Clevis: ign.Clevis{Tang: []ign.Tang{{
					URL: "https://tang.example.com", Thumbprint: ptr("REPLACE-WITH-THUMBPRINT"), Advertisement: ptr(`{"payload": "...", "protected": "...", "signature": "..."}`),
				}}}}}
			})},
			outcome: refresh.InPlace,
		}),
		Entry("TestIsRenderedConfigReconcilable FIPS: a FIPS change is refused", mcoCase{
			new:     []cfgOpt{withMC(func(c *refresh.Spec) { c.FIPS = true })},
			outcome: refresh.Reject,
		}),
		Entry("TestIsRenderedConfigReconcilable forcefile: a config may not create the force file", mcoCase{
			new:     []cfgOpt{withFile(refresh.ForceFile, "data:,", 0o644)},
			outcome: refresh.Reject,
		}),
		Entry("TestReconcilableSSH: adding core's ssh keys is for the sshkey policy", mcoCase{
			new:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("5678", "abc")})},
			outcome: refresh.InPlace,
		}),
		Entry("TestReconcilableSSH: a user other than core is refused", mcoCase{
			old:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("1234")})},
			new:     []cfgOpt{withUsers(ign.PasswdUser{Name: "another user", SSHAuthorizedKeys: keys("5678")})},
			outcome: refresh.Reject,
		}),
		Entry("TestReconcilableSSH: any other field of core is refused", mcoCase{
			old:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("1234")})},
			new:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("5678"), HomeDir: ptr("somedir")})},
			outcome: refresh.Reject,
		}),
		Entry("TestReconcilableSSH: a second user is refused", mcoCase{
			old:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("1234")})},
			new:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("5678")}, ign.PasswdUser{Name: "some user", SSHAuthorizedKeys: keys("5678")})},
			outcome: refresh.Reject,
		}),
		Entry("TestReconcilableSSH: core left with no key and no password is refused", mcoCase{
			old:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("1234")})},
			new:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys()})},
			outcome: refresh.Reject,
		}),
		Entry("TestReconcilableSSH: removing every user (core's entry too) is for the sshkey policy", mcoCase{
			old:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("1234")})},
			outcome: refresh.InPlace,
		}),
	)
})

var _ = Describe("Cases ported from the MCO's update_test.go", func() {
	DescribeTable("pkg/daemon/update_test.go TestMachineConfigDiff", checkMCOCase,
		Entry("empty configs are equal", mcoCase{outcome: refresh.NoChange}),
		Entry("an OS image change reboots", mcoCase{
			new: []cfgOpt{withMC(func(c *refresh.Spec) {
				c.OSImageURL = "quay.io/example/foo@sha256:b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c"
			})},
			outcome: refresh.Reboot,
		}),
		Entry("nil and empty kernel arguments are equal", mcoCase{
			old:     []cfgOpt{withMC(func(c *refresh.Spec) { c.KernelArguments = nil })},
			new:     []cfgOpt{withMC(func(c *refresh.Spec) { c.KernelArguments = []string{} })},
			outcome: refresh.NoChange,
		}),
		Entry("SSH key changes recognized - Empty MC", mcoCase{
			new:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("1234")})},
			outcome: refresh.InPlace,
		}),
		Entry("SSH key changes recognized - New Key", mcoCase{
			old:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("5678")})},
			new:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", SSHAuthorizedKeys: keys("1234")})},
			outcome: refresh.InPlace,
		}),
		Entry("PasswordHash changes recognized - Empty MC", mcoCase{
			new:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", PasswordHash: ptr("testpass")})},
			outcome: refresh.InPlace,
		}),
		Entry("PasswordHash changes recognized - Password Change", mcoCase{
			old:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", PasswordHash: ptr("newtestpass")})},
			new:     []cfgOpt{withUsers(ign.PasswdUser{Name: "core", PasswordHash: ptr("testpass")})},
			outcome: refresh.InPlace,
		}),
	)

	tenFiles := func(extra ...cfgOpt) []cfgOpt {
		var opts []cfgOpt
		for i := range 10 {
			opts = append(opts, withFile(fmt.Sprintf("/etc/config%d", i), fmt.Sprintf("data:,config%d", i), 0o644))
		}
		return append(opts, extra...)
	}
	DescribeTable("pkg/daemon/update_test.go TestReconcilableDiff", checkMCOCase,
		Entry("add file: applies, and with no policy for it reboots", mcoCase{
			old: tenFiles(), new: tenFiles(withFile("/etc/config11", "data:,config11", 0o644)), outcome: refresh.Reboot,
		}),
		Entry("remove all files: applies, and with no policy for them reboots", mcoCase{old: tenFiles(), outcome: refresh.Reboot}),
		Entry("os update reboots", mcoCase{
			old: tenFiles(), new: tenFiles(withMC(func(c *refresh.Spec) { c.OSImageURL = "example.com/rhel-coreos:new" })), outcome: refresh.Reboot,
		}),
	)

	const (
		pullSecret = "/var/lib/kubelet/config.json"
		randomFile = "/etc/random-reboot-file"
		kubeletCA  = "/etc/kubernetes/kubelet-ca.crt"
		policyJSON = "/etc/containers/policy.json"
		gpgKey     = "/etc/machine-config-daemon/no-reboot/containers-gpg.pub"
		userCA     = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
	)
	// The upstream registries contents are not TOML (the pre-policy path never parses them); these
	// are, with a safe change: a search registry appended.
	registries1 := withRegistries(`unqualified-search-registries = ["registry.access.redhat.com"]`)
	registries2 := withRegistries(`unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]`)
	restartCATrust := refresh.Action{Type: refresh.ActionRestart, Unit: "coreos-update-ca-trust.service"}
	osImage := withMC(func(c *refresh.Spec) { c.OSImageURL = "dummy1://" })
	DescribeTable("pkg/daemon/update_test.go TestCalculatePostConfigChangeAction", checkMCOCase,
		Entry("case#0: a file without a policy reboots", mcoCase{
			old: []cfgOpt{file(randomFile, "test\n")}, new: []cfgOpt{file(randomFile, "test 2\n")}, outcome: refresh.Reboot,
		}),
		Entry("case#1: a pull secret change needs no action", mcoCase{
			old: []cfgOpt{file(pullSecret, "kubelet conf 1\n")}, new: []cfgOpt{file(pullSecret, "kubelet conf 2\n")}, outcome: refresh.InPlace,
		}),
		Entry("case#2: an ssh key change needs no action", mcoCase{
			old: []cfgOpt{withSSHKeys("key1")}, new: []cfgOpt{withSSHKeys("key2")}, outcome: refresh.InPlace,
		}),
		Entry("case#3: a registries change reloads crio", mcoCase{
			old: []cfgOpt{registries1}, new: []cfgOpt{registries2}, outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio},
		}),
		Entry("case#4: a kubelet CA change: None before policies; no default policy names it, so Reboot", mcoCase{
			old: []cfgOpt{file(kubeletCA, "kubeletCA1\n")}, new: []cfgOpt{file(kubeletCA, "kubeletCA2\n")}, outcome: refresh.Reboot,
		}),
		Entry("case#5: a registries change (reload) with a pull secret change (none) reloads crio", mcoCase{
			old:     []cfgOpt{registries1, file(pullSecret, "kubelet conf 1\n")},
			new:     []cfgOpt{registries2, file(pullSecret, "kubelet conf 2\n")},
			outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio},
		}),
		Entry("case#6: an OS image change overrides a registries reload and an ssh key change", mcoCase{
			old: []cfgOpt{registries1, withSSHKeys("key1")}, new: []cfgOpt{registries2, withSSHKeys("key2"), osImage}, outcome: refresh.Reboot,
		}),
		Entry("case#7: adding a pull secret needs no action", mcoCase{
			old: []cfgOpt{registries1, withSSHKeys("key1")}, new: []cfgOpt{registries1, file(pullSecret, "kubelet conf 2\n"), withSSHKeys("key1")}, outcome: refresh.InPlace,
		}),
		Entry("case#8: removing registries.conf reloads crio; its registries go, so Drain first", mcoCase{
			old:     []cfgOpt{file(randomFile, "test\n"), registries1, withSSHKeys("key1")},
			new:     []cfgOpt{file(randomFile, "test\n"), withSSHKeys("key1")},
			outcome: refresh.InPlace, actions: []refresh.Action{drain, reloadCrio},
		}),
		Entry("case#9: a kernel argument change reboots whatever else changes", mcoCase{
			old: []cfgOpt{registries1, withSSHKeys("key1")},
			new: []cfgOpt{file(pullSecret, "kubelet conf 2\n"), file(kubeletCA, "kubeletCA1\n"), withSSHKeys("key2"),
				withMC(func(c *refresh.Spec) { c.KernelArguments = []string{"karg1"} })},
			outcome: refresh.Reboot,
		}),
		Entry("case#10: a policy.json change reloads crio", mcoCase{
			old: []cfgOpt{file(policyJSON, "policy1")}, new: []cfgOpt{file(policyJSON, "policy2")}, outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio},
		}),
		Entry("case#11: a containers-gpg.pub change reloads crio", mcoCase{
			old: []cfgOpt{file(gpgKey, "containers-gpg1")}, new: []cfgOpt{file(gpgKey, "containers-gpg2")}, outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio},
		}),
		Entry("case#12: a user CA bundle change restarts coreos-update-ca-trust, then crio", mcoCase{
			old: []cfgOpt{file(userCA, "restart-crio1")}, new: []cfgOpt{file(userCA, "restart-crio2")},
			outcome: refresh.InPlace, actions: []refresh.Action{restartCATrust, restartCrio},
		}),
		Entry("case#13: a user CA bundle change and a new gpg key: every action runs, the crio reload too", mcoCase{
			old:     []cfgOpt{file(userCA, "restart-crio1")},
			new:     []cfgOpt{file(userCA, "restart-crio2"), file(gpgKey, "containers-gpg1")},
			outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio, restartCATrust, restartCrio},
		}),
	)

	statusPolicies := func(paths map[string][]operatorv1.NodeDisruptionPolicyStatusAction, order ...string) *refresh.Policies {
		p := refresh.Policies{}
		for _, path := range order {
			p.Files = append(p.Files, operatorv1.NodeDisruptionPolicyStatusFile{Path: path, Actions: paths[path]})
		}
		return &p
	}
	none := []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.NoneStatusAction}}
	reboot := []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.RebootStatusAction}}
	reloadCrioStatus := []operatorv1.NodeDisruptionPolicyStatusAction{{Type: operatorv1.ReloadStatusAction, Reload: &operatorv1.ReloadService{ServiceName: "crio.service"}}}
	changed := func(path string) ([]cfgOpt, []cfgOpt) {
		return []cfgOpt{file(path, "a")}, []cfgOpt{file(path, "b")}
	}
	closest := func(diffPath string, policies *refresh.Policies, outcome refresh.Outcome, actions ...refresh.Action) mcoCase {
		old, new := changed(diffPath)
		return mcoCase{old: old, new: new, policies: policies, outcome: outcome, actions: actions}
	}
	DescribeTable("pkg/daemon/update_test.go TestFindClosestFilePolicyPathMatch", checkMCOCase,
		Entry("case#0: a file no policy matches reboots", closest("/etc/mco/test",
			statusPolicies(map[string][]operatorv1.NodeDisruptionPolicyStatusAction{"/etc/example": none}, "/etc/example"), refresh.Reboot)),
		Entry("case#1: a file's own policy applies", closest("/etc/mco/test1",
			statusPolicies(map[string][]operatorv1.NodeDisruptionPolicyStatusAction{"/etc/mco/test1": none, "/etc/mco/test2": reboot}, "/etc/mco/test1", "/etc/mco/test2"), refresh.InPlace)),
		Entry("case#2: the closest folder policy applies", closest("/etc/mco/f1/f2/example",
			statusPolicies(map[string][]operatorv1.NodeDisruptionPolicyStatusAction{"/etc/mco/f1": none, "/etc/mco/f1/f2": reboot, "/etc/mco/f1/f2/f3": reloadCrioStatus}, "/etc/mco/f1", "/etc/mco/f1/f2", "/etc/mco/f1/f2/f3"), refresh.Reboot)),
		Entry("case#3: an exact match beats its folders", closest("/etc/mco/f1/f2/f3",
			statusPolicies(map[string][]operatorv1.NodeDisruptionPolicyStatusAction{"/etc/mco/f1": none, "/etc/mco/f1/f2": reboot, "/etc/mco/f1/f2/f3": reloadCrioStatus}, "/etc/mco/f1", "/etc/mco/f1/f2", "/etc/mco/f1/f2/f3"), refresh.InPlace, reloadCrio)),
		Entry("case#4: paths that only share a prefix do not match", closest("/etc/mco/f1/f2/f3",
			statusPolicies(map[string][]operatorv1.NodeDisruptionPolicyStatusAction{"/etc/mco/f1/test": none, "/etc/mco/f1/f2/test": reboot, "/etc/mco/f1/f2/f3/f4": reloadCrioStatus}, "/etc/mco/f1/test", "/etc/mco/f1/f2/test", "/etc/mco/f1/f2/f3/f4"), refresh.Reboot)),
	)
})

// Pieces of registries.conf, and the versions built from them that stand for the upstream
// TestIsDrainRequired fixtures mc1..mc13: the same registries, mirrors and settings.
const (
	searchTwo   = `unqualified-search-registries = ["example.com", "foo.com"]` + "\n"
	searchThree = `unqualified-search-registries = ["example.com", "foo.com", "bar.com"]` + "\n"
	registryA   = "[[registry]]\nlocation = \"example.com/repo/test-img\"\n"
	mirrorA     = "[[registry.mirror]]\nlocation = \"mirror.com/repo/test-img\"\n"
	registryB   = "[[registry]]\nlocation = \"example.com/repo1/test-img1\"\n"
	mirrorB     = "[[registry.mirror]]\nlocation = \"mirror.com/repo1/test-img1\"\n"
	mirrorB1    = "[[registry.mirror]]\nlocation = \"mirror1.com/repo1/test-img1\"\n"
	registryBar = "[[registry]]\nprefix = \"bar.com\"\nlocation = \"example.com/repo/test-img\"\n"
	registryC   = "[[registry]]\nlocation = \"example.com/repo1/test-img\"\n"
	mirrorC     = "[[registry.mirror]]\nlocation = \"mirror.com/repo1/test-img\"\n"
	digestOnly  = "pull-from-mirror = \"digest-only\"\n"
	blocked     = "blocked = true\n"
	byDigest    = "mirror-by-digest-only = true\n"
)

var drainFixtures = map[string]string{
	"mc1":  searchTwo + registryA + mirrorA + registryB + mirrorB + digestOnly,
	"mc2":  searchTwo + registryA + mirrorA + registryB + mirrorB + digestOnly + mirrorB1 + digestOnly,
	"mc3":  searchTwo + registryA + mirrorA,
	"mc4":  searchThree + registryA + mirrorA + digestOnly,
	"mc5":  searchTwo + registryA + mirrorA + digestOnly,
	"mc6":  searchTwo + registryA + mirrorA + digestOnly + registryB,
	"mc7":  searchTwo + registryA + mirrorA + digestOnly + registryB + mirrorB,
	"mc8":  searchTwo + registryBar,
	"mc9":  searchTwo + registryBar + blocked,
	"mc10": searchTwo + registryA,
	"mc11": searchTwo + registryC + mirrorC + digestOnly + registryBar + blocked,
	"mc12": searchTwo + registryA + byDigest + mirrorA,
	"mc13": searchTwo + registryA + byDigest + mirrorA + "[[registry.mirror]]\nlocation = \"mirror.com/repo/test-img-13\"\n",
}

var _ = Describe("Cases ported from the MCO's drain_test.go", func() {
	registries := func(from, to string, drained bool) mcoCase {
		actions := []refresh.Action{reloadCrio}
		if drained {
			actions = []refresh.Action{drain, reloadCrio}
		}
		return mcoCase{old: []cfgOpt{withRegistries(drainFixtures[from])}, new: []cfgOpt{withRegistries(drainFixtures[to])}, outcome: refresh.InPlace, actions: actions}
	}
	DescribeTable("pkg/daemon/drain_test.go TestIsDrainRequired", checkMCOCase,
		Entry("case#0: only None: no drain", mcoCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"]), file(pullSecretPath, "a")}, new: []cfgOpt{withRegistries(drainFixtures["mc1"]), file(pullSecretPath, "b")},
			outcome: refresh.InPlace,
		}),
		Entry("case#1: a Reboot drains (the reboot does)", mcoCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"]), file("/etc/motd", "a")}, new: []cfgOpt{withRegistries(drainFixtures["mc1"]), file("/etc/motd", "b")},
			outcome: refresh.Reboot,
		}),
		Entry("case#2: no change to the registries: no drain", mcoCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"])}, new: []cfgOpt{withRegistries(drainFixtures["mc1"] + "\n# same registries\n")},
			outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio},
		}),
		Entry("case#3: a registry added whose mirrors are digest-only: no drain", registries("mc3", "mc1", false)),
		Entry("case#4: a registry added without mirrors or mirror-by-digest-only: drain", registries("mc5", "mc6", true)),
		Entry("case#5: a registry removed: drain", registries("mc1", "mc3", true)),
		Entry("case#6: digest-only mirrors added: no drain", registries("mc1", "mc2", false)),
		Entry("case#7: a digest-only registry added beside an unchanged one: no drain", registries("mc9", "mc11", false)),
		Entry("case#8: a mirror added that is not digest-only: drain", registries("mc6", "mc7", true)),
		Entry("case#9: a mirror removed: drain", registries("mc2", "mc1", true)),
		Entry("case#10: a search registry removed: drain", registries("mc4", "mc3", true)),
		Entry("case#11: a search registry appended: no drain", registries("mc3", "mc4", false)),
		Entry("case#12: a prefix changed: drain", registries("mc8", "mc10", true)),
		Entry("case#13: blocked changed: drain", registries("mc8", "mc9", true)),
		Entry("case#14: a registry's mirrors changed and digest-only dropped: drain", registries("mc1", "mc6", true)),
		Entry("case#15: a mirror added to a mirror-by-digest-only registry: no drain", registries("mc12", "mc13", false)),
	)
})

const pullSecretPath = "/var/lib/kubelet/config.json"

func file(path, contents string) cfgOpt { return withFile(path, pct(contents), 0o644) }

var _ = Describe("Cases ported from the MCO's end-to-end tests", func() {
	// test/e2e-2of2/nodedisrupt_test.go TestNodeDisruptionPolicies tries each action of three sets
	// (None and Drain; Reboot; DaemonReload, Restart crio and Reload crio) as a file, a unit and an
	// sshkey policy, one action at a time.
	type actionCase struct {
		spec     operatorv1.NodeDisruptionPolicySpecAction
		outcome  refresh.Outcome
		expected []refresh.Action
	}
	actionCases := []actionCase{
		{specAction(operatorv1.NoneSpecAction), refresh.InPlace, nil},
		{specAction(operatorv1.DrainSpecAction), refresh.InPlace, []refresh.Action{drain}},
		{specAction(operatorv1.RebootSpecAction), refresh.Reboot, nil},
		{specAction(operatorv1.DaemonReloadSpecAction), refresh.InPlace, []refresh.Action{daemonReload}},
		{specRestart("crio.service"), refresh.InPlace, []refresh.Action{restartCrio}},
		{specReload("crio.service"), refresh.InPlace, []refresh.Action{reloadCrio}},
	}
	var entries []TableEntry
	for _, a := range actionCases {
		name := string(a.spec.Type)
		if a.spec.Restart != nil || a.spec.Reload != nil {
			name += " crio.service"
		}
		fileName, unitName := "/etc/test-"+string(a.spec.Type), string(a.spec.Type)+"-test.service"
		entries = append(entries,
			Entry("testFilePolicy "+name, func() mcoCase {
				return mcoCase{new: []cfgOpt{file(fileName, "test\n")}, outcome: a.outcome, actions: a.expected,
					policies: mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{Files: []operatorv1.NodeDisruptionPolicySpecFile{{Path: fileName, Actions: []operatorv1.NodeDisruptionPolicySpecAction{a.spec}}}})}
			}),
			Entry("testUnitPolicy "+name, func() mcoCase {
				return mcoCase{new: []cfgOpt{withUnit(unitName, "test")}, outcome: a.outcome, actions: a.expected,
					policies: mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{Units: []operatorv1.NodeDisruptionPolicySpecUnit{{Name: operatorv1.NodeDisruptionPolicyServiceName(unitName), Actions: []operatorv1.NodeDisruptionPolicySpecAction{a.spec}}}})}
			}),
			Entry("testSSHKeyPolicy "+name, func() mcoCase {
				return mcoCase{new: []cfgOpt{withSSHKeys("test")}, outcome: a.outcome, actions: a.expected,
					policies: mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{SSHKey: operatorv1.NodeDisruptionPolicySpecSSHKey{Actions: []operatorv1.NodeDisruptionPolicySpecAction{a.spec}}})}
			}),
		)
	}
	DescribeTable("test/e2e-2of2/nodedisrupt_test.go TestNodeDisruptionPolicies", func(c func() mcoCase) { checkMCOCase(c()) }, entries)

	const searchTestIO = `unqualified-search-registries = ["example.com", "foo.com", "test.io"]` + "\n"
	DescribeTable("test/e2e-2of2/nodedisrupt_test.go TestNodeDisruptionPolicySpecialAction", checkMCOCase,
		Entry("a search registry added: Special reloads crio, no drain", mcoCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc3"])}, new: []cfgOpt{withRegistries(searchTestIO + registryA + mirrorA)},
			outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio},
		}),
		Entry("the change rolled back (a search registry removed): drain, then reload crio", mcoCase{
			old: []cfgOpt{withRegistries(searchTestIO + registryA + mirrorA)}, new: []cfgOpt{withRegistries(drainFixtures["mc3"])},
			outcome: refresh.InPlace, actions: []refresh.Action{drain, reloadCrio},
		}),
	)

	// test/extended-priv/mco_nodedisruptionpolicy.go: one policy per case; TestService is crio.service.
	filePolicy := func(path string, actions ...operatorv1.NodeDisruptionPolicySpecAction) *refresh.Policies {
		return mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{Files: []operatorv1.NodeDisruptionPolicySpecFile{{Path: path, Actions: actions}}})
	}
	unitPolicy := func(unit string, actions ...operatorv1.NodeDisruptionPolicySpecAction) *refresh.Policies {
		return mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{Units: []operatorv1.NodeDisruptionPolicySpecUnit{{Name: operatorv1.NodeDisruptionPolicyServiceName(unit), Actions: actions}}})
	}
	sshPolicy := func(actions ...operatorv1.NodeDisruptionPolicySpecAction) *refresh.Policies {
		return mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{SSHKey: operatorv1.NodeDisruptionPolicySpecSSHKey{Actions: actions}})
	}
	multiple := []operatorv1.NodeDisruptionPolicySpecAction{specAction(operatorv1.DrainSpecAction), specAction(operatorv1.DaemonReloadSpecAction), specReload("crio.service"), specRestart("crio.service")}
	multipleDone := []refresh.Action{drain, daemonReload, reloadCrio, restartCrio}
	const testFile, testUnit = "/etc/test-file-policy-73368", "test-ndp-x.service"
	unitAdded := []cfgOpt{withUnit(testUnit, "[Unit]\nDescription=test service for disruption policy")}
	const (
		innerDir = "/etc/test-file-policy-subdir-75109/extradir/"
		outerDir = "/etc/test-file-policy-subdir-75109"
		oneFile  = "/etc/test-file-policy-subdir-75109/test-file.txt"
	)
	nested := func() *refresh.Policies {
		return mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{Files: []operatorv1.NodeDisruptionPolicySpecFile{
			{Path: innerDir, Actions: []operatorv1.NodeDisruptionPolicySpecAction{specAction(operatorv1.NoneSpecAction)}},
			{Path: outerDir, Actions: []operatorv1.NodeDisruptionPolicySpecAction{specRestart("crio.service")}},
			{Path: oneFile, Actions: []operatorv1.NodeDisruptionPolicySpecAction{specReload("crio.service")}},
		}})
	}
	DescribeTable("test/extended-priv/mco_nodedisruptionpolicy.go", func(c func() mcoCase) { checkMCOCase(c()) },
		Entry("PolarionID:73368 files with action None", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(testFile, "test-73368")}, policies: filePolicy(testFile, specAction(operatorv1.NoneSpecAction)), outcome: refresh.InPlace}
		}),
		Entry("PolarionID:73374 files with action Reboot", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(testFile, "test-73374")}, policies: filePolicy(testFile, specAction(operatorv1.RebootSpecAction)), outcome: refresh.Reboot}
		}),
		Entry("PolarionID:73375 files with action Restart", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(testFile, "test-73375")}, policies: filePolicy(testFile, specRestart("crio.service")), outcome: refresh.InPlace, actions: []refresh.Action{restartCrio}}
		}),
		Entry("PolarionID:73378 files with action Reload", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(testFile, "test-73378")}, policies: filePolicy(testFile, specReload("crio.service")), outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio}}
		}),
		Entry("PolarionID:73385 files with action DaemonReload", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(testFile, "test-73385")}, policies: filePolicy(testFile, specAction(operatorv1.DaemonReloadSpecAction)), outcome: refresh.InPlace, actions: []refresh.Action{daemonReload}}
		}),
		Entry("PolarionID:73388 files with action Drain", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(testFile, "test-73388")}, policies: filePolicy(testFile, specAction(operatorv1.DrainSpecAction)), outcome: refresh.InPlace, actions: []refresh.Action{drain}}
		}),
		Entry("PolarionID:73389 files with multiple actions: all run, in order", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(testFile, "test-73389")}, policies: filePolicy(testFile, multiple...), outcome: refresh.InPlace, actions: multipleDone}
		}),
		Entry("PolarionID:73414 units with action None", func() mcoCase {
			return mcoCase{new: unitAdded, policies: unitPolicy(testUnit, specAction(operatorv1.NoneSpecAction)), outcome: refresh.InPlace}
		}),
		Entry("PolarionID:73413 units with action Reboot", func() mcoCase {
			return mcoCase{new: unitAdded, policies: unitPolicy(testUnit, specAction(operatorv1.RebootSpecAction)), outcome: refresh.Reboot}
		}),
		Entry("PolarionID:73411 units with multiple actions: all run, in order", func() mcoCase {
			return mcoCase{new: unitAdded, policies: unitPolicy(testUnit, multiple...), outcome: refresh.InPlace, actions: multipleDone}
		}),
		Entry("PolarionID:73417 sshkey with action None", func() mcoCase {
			return mcoCase{new: []cfgOpt{withSSHKeys("ssh-ed25519 AAAA")}, policies: sshPolicy(specAction(operatorv1.NoneSpecAction)), outcome: refresh.InPlace}
		}),
		Entry("PolarionID:73418 sshkey with action Reboot", func() mcoCase {
			return mcoCase{new: []cfgOpt{withSSHKeys("ssh-ed25519 AAAA")}, policies: sshPolicy(specAction(operatorv1.RebootSpecAction)), outcome: refresh.Reboot}
		}),
		Entry("PolarionID:73415 sshkey with multiple actions: all run, in order", func() mcoCase {
			return mcoCase{new: []cfgOpt{withSSHKeys("ssh-ed25519 AAAA")}, policies: sshPolicy(multiple...), outcome: refresh.InPlace, actions: multipleDone}
		}),
		Entry("PolarionID:75109 a file in the inner folder (policy path with a trailing /): None", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(innerDir+"test-file-inner.txt", "test-75109.txt")}, policies: nested(), outcome: refresh.InPlace}
		}),
		Entry("PolarionID:75109 a file in the outer folder: Restart", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(outerDir+"/test-file-outer.txt", "test-75109.txt")}, policies: nested(), outcome: refresh.InPlace, actions: []refresh.Action{restartCrio}}
		}),
		Entry("PolarionID:75109 a file with its own policy: Reload", func() mcoCase {
			return mcoCase{new: []cfgOpt{file(oneFile, "test-75109.txt")}, policies: nested(), outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio}}
		}),
	)
})

var _ = Describe("Parse cases ported from the MCO", func() {
	DescribeTable("refuses what the MCO refuses to parse, naming it",
		func(raw, message string) {
			_, err := refresh.Parse([]byte(raw))
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("reconcile_test.go TestIsRenderedConfigReconcilable Ignition: version 4.0.0", `{"ignition":{"version":"4.0.0"}}`, `unsupported Ignition version "4.0.0"`),
		Entry("update_test.go TestInvalidIgnConfig: a relative file path", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"home/core/test","contents":{"source":"data:,hello%20world%0A"},"mode":420}]}}`, "invalid Ignition config"),
	)

	It("update_test.go TestInvalidIgnConfig: an absolute file path is a file change", func() {
		cfg, err := refresh.Parse([]byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/home/core/test","contents":{"source":"data:,hello%20world%0A"},"mode":420}]}}`))
		Expect(err).NotTo(HaveOccurred())
		changes, err := refresh.Diff(config(), cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(changes).To(ContainElement(And(HaveField("Kind", refresh.KindFile), HaveField("Name", "/home/core/test"))))
	})
})

// issue 20: the places where a differential run against the MCO's own functions found a different
// answer. Each row names the MCO function whose behaviour it pins, or says why the answer here is
// deliberately safer.
var _ = Describe("Issue 20: decided as the MCO's own code decides", func() {
	type rowCase struct {
		old, new []cfgOpt
		policies *refresh.Policies
		outcome  refresh.Outcome
		actions  []refresh.Action
		rule     string // a substring of some change's rule
	}
	check := func(c rowCase) {
		checkMCOCase(mcoCase{old: c.old, new: c.new, policies: c.policies, outcome: c.outcome, actions: c.actions})
		if c.rule != "" {
			policies := defaults
			if c.policies != nil {
				policies = *c.policies
			}
			res := decide(config(c.old...), config(c.new...), policies)
			Expect(res.Changes).To(ContainElement(HaveField("Rule", ContainSubstring(c.rule))), "%+v", res.Changes)
		}
	}
	specialFile := func(path string, mode int) cfgOpt { return withFile(path, pct("#!/bin/sh\n"), mode) }
	filePolicy := func(path string, actions ...operatorv1.NodeDisruptionPolicySpecAction) *refresh.Policies {
		return mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{Files: []operatorv1.NodeDisruptionPolicySpecFile{{Path: path, Actions: actions}}})
	}

	DescribeTable("item 4: modes above 0777 (pkg/controller/common/helpers.go validateIgn3FileModes, via ValidateIgnition in isReconcilable)", check,
		Entry("a setuid file added is refused, path and mode named", rowCase{
			new: []cfgOpt{specialFile("/usr/local/bin/tool", 0o4755)}, policies: filePolicy("/usr/local/bin", specAction(operatorv1.NoneSpecAction)),
			outcome: refresh.Reject, rule: "file /usr/local/bin/tool has mode 04755",
		}),
		Entry("a mode changed to setgid is refused", rowCase{
			old: []cfgOpt{specialFile("/etc/tool", 0o755)}, new: []cfgOpt{specialFile("/etc/tool", 0o2755)},
			policies: filePolicy("/etc/tool", specAction(operatorv1.NoneSpecAction)), outcome: refresh.Reject, rule: "has mode 02755",
		}),
		Entry("an unchanged sticky file is refused when anything else changes", rowCase{
			old: []cfgOpt{specialFile("/etc/shared", 0o1777), file(pullSecretPath, "a")}, new: []cfgOpt{specialFile("/etc/shared", 0o1777), file(pullSecretPath, "b")},
			outcome: refresh.Reject, rule: "file /etc/shared has mode 01777",
		}),
		Entry("0777 is allowed", rowCase{
			new: []cfgOpt{specialFile("/etc/tool", 0o777)}, policies: filePolicy("/etc/tool", specAction(operatorv1.NoneSpecAction)), outcome: refresh.InPlace,
		}),
		Entry("removing a setuid file is allowed: only the new config is checked", rowCase{
			old: []cfgOpt{specialFile("/etc/tool", 0o4755)}, policies: filePolicy("/etc/tool", specAction(operatorv1.NoneSpecAction)), outcome: refresh.InPlace,
		}),
		Entry("no change at all is no change, as the daemon does not check an unchanged config", rowCase{
			old: []cfgOpt{specialFile("/etc/tool", 0o4755)}, new: []cfgOpt{specialFile("/etc/tool", 0o4755)}, outcome: refresh.NoChange,
		}),
	)

	registriesDrained := []refresh.Action{drain, reloadCrio}
	DescribeTable("item 5: registries.conf read with the containers library (pkg/daemon/drain.go isSafeContainerRegistryConfChanges decodes sysregistriesv2.V2RegistriesConf; crio loads it with sysregistriesv2)", check,
		Entry("issue 20: additional-layer-store-auth-helper = 5 is refused", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"])}, new: []cfgOpt{withRegistries("additional-layer-store-auth-helper = 5\n" + drainFixtures["mc1"])},
			outcome: refresh.Reject, rule: "cannot be loaded by crio",
		}),
		Entry("issue 20: credential-helpers as a string is refused", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"])}, new: []cfgOpt{withRegistries("credential-helpers = \"containers-auth.json\"\n" + drainFixtures["mc1"])},
			outcome: refresh.Reject, rule: "credential-helpers",
		}),
		Entry("an unsupported pull-from-mirror is refused (postProcessRegistries)", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"])}, new: []cfgOpt{withRegistries(searchTwo + registryA + mirrorA + "pull-from-mirror = \"sometimes\"\n")},
			outcome: refresh.Reject, rule: `unsupported pull-from-mirror value "sometimes"`,
		}),
		Entry("mirror-by-digest-only beside a pull-from-mirror is refused (postProcessRegistries)", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc12"])}, new: []cfgOpt{withRegistries(searchTwo + registryA + byDigest + mirrorA + digestOnly)},
			outcome: refresh.Reject, rule: "cannot set mirror usage mirror-by-digest-only",
		}),
		Entry("a location with a URI scheme is refused (parseLocation)", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc10"])}, new: []cfgOpt{withRegistries(searchTwo + "[[registry]]\nlocation = \"https://example.com/repo\"\n")},
			outcome: refresh.Reject, rule: "URI schemes are not supported",
		}),
		Entry("v1 and v2 keys mixed are refused (loadConfigFile)", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc10"])}, new: []cfgOpt{withRegistries("[registries.search]\nregistries = [\"a.example.com\"]\n" + registryA)},
			outcome: refresh.Reject, rule: "mixing sysregistry v1/v2 is not supported",
		}),
		Entry("an invalid short-name-mode is refused (parseShortNameMode)", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc10"])}, new: []cfgOpt{withRegistries("short-name-mode = \"loose\"\n" + drainFixtures["mc10"])},
			outcome: refresh.Reject, rule: "cannot be loaded by crio",
		}),
		Entry("an unknown key is only logged by the library: a safe change", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc3"])}, new: []cfgOpt{withRegistries("some-future-key = true\n" + drainFixtures["mc4"])},
			outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio},
		}),
		Entry("a mirror's insecure changed drains (the MCO does not look; a mirror without TLS checks is a different pull path)", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc5"])}, new: []cfgOpt{withRegistries(drainFixtures["mc5"] + "insecure = true\n")},
			outcome: refresh.InPlace, actions: registriesDrained, rule: "mirror mirror.com/repo/test-img: insecure changed",
		}),
	)

	unloadable := withRegistries("additional-layer-store-auth-helper = 5\n")
	DescribeTable("item 6: the safe answers where the MCO's are not", check,
		Entry("issue 20: mirror-by-digest-only turned off, the mirror not digest-only: tag pulls now go through the mirror, so drain (isSafeContainerRegistryConfChanges says safe)", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc12"])}, new: []cfgOpt{withRegistries(searchTwo + registryA + mirrorA)},
			outcome: refresh.InPlace, actions: registriesDrained, rule: "mirror mirror.com/repo/test-img now takes all pulls, not digest-only",
		}),
		Entry("mirror-by-digest-only turned off with every mirror digest-only: no drain", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc12"])}, new: []cfgOpt{withRegistries(drainFixtures["mc5"])},
			outcome: refresh.InPlace, actions: []refresh.Action{reloadCrio},
		}),
		Entry("issue 20: an unloadable registries.conf is refused beside a change that reboots (the MCO reboots into it)", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"])}, new: []cfgOpt{unloadable, withMC(func(c *refresh.Spec) { c.OSImageURL = "example.com/rhel-coreos:new" })},
			outcome: refresh.Reject, rule: "cannot be loaded by crio",
		}),
		Entry("issue 20: an unloadable registries.conf is refused under a Drain policy (the MCO drains and writes it)", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"])}, new: []cfgOpt{unloadable},
			policies: filePolicy(refresh.RegistriesConf, specAction(operatorv1.DrainSpecAction), specReload("crio.service")),
			outcome:  refresh.Reject, rule: "cannot be loaded by crio",
		}),
		Entry("an unloadable registries.conf is refused under a Reboot policy", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"])}, new: []cfgOpt{unloadable},
			policies: filePolicy(refresh.RegistriesConf, specAction(operatorv1.RebootSpecAction)), outcome: refresh.Reject,
		}),
		Entry("removing registries.conf is not refused: crio starts without one", rowCase{
			old: []cfgOpt{withRegistries(drainFixtures["mc1"])}, outcome: refresh.InPlace, actions: registriesDrained,
		}),
	)

	unitPolicies := mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{Units: []operatorv1.NodeDisruptionPolicySpecUnit{
		{Name: "a.service", Actions: []operatorv1.NodeDisruptionPolicySpecAction{specRestart("a.service")}},
		{Name: "b.service", Actions: []operatorv1.NodeDisruptionPolicySpecAction{specRestart("b.service")}},
		{Name: "c.service", Actions: []operatorv1.NodeDisruptionPolicySpecAction{specRestart("c.service")}},
	}})
	restart := func(unit string) refresh.Action { return refresh.Action{Type: refresh.ActionRestart, Unit: unit} }
	withPassword := func(keys []ign.SSHAuthorizedKey) cfgOpt {
		return withUsers(ign.PasswdUser{Name: "core", PasswordHash: ptr("$6$hash"), SSHAuthorizedKeys: keys})
	}
	rebootKeys := mergedPolicies(operatorv1.NodeDisruptionPolicyConfig{SSHKey: operatorv1.NodeDisruptionPolicySpecSSHKey{Actions: []operatorv1.NodeDisruptionPolicySpecAction{specAction(operatorv1.RebootSpecAction)}}})
	DescribeTable("item 7: equalities and orders", check,
		Entry("unit actions run for added units, then updated, then removed (pkg/daemon/update.go: GetChangedConfigUnitsByType Added, Updated, Removed)", rowCase{
			old: []cfgOpt{withUnit("a.service", "a"), withUnit("b.service", "b")}, new: []cfgOpt{withUnit("b.service", "b2"), withUnit("c.service", "c")},
			policies: unitPolicies, outcome: refresh.InPlace, actions: []refresh.Action{restart("c.service"), restart("b.service"), restart("a.service")},
		}),
		Entry("kept: drop-ins reordered are no change (the MCO's reflect.DeepEqual sees one; each drop-in is its own file, read in name order)", rowCase{
			old:     []cfgOpt{withUnit("b.service", "b", ign.Dropin{Name: "10-a.conf", Contents: ptr("x")}, ign.Dropin{Name: "20-b.conf", Contents: ptr("y")})},
			new:     []cfgOpt{withUnit("b.service", "b", ign.Dropin{Name: "20-b.conf", Contents: ptr("y")}, ign.Dropin{Name: "10-a.conf", Contents: ptr("x")})},
			outcome: refresh.NoChange,
		}),
		Entry(`kept: absent unit contents and "" are no change (the daemon's unitHasContent writes both alike)`, rowCase{
			old: []cfgOpt{withMC(func(c *refresh.Spec) {
				c.Ignition.Systemd.Units = []ign.Unit{{Name: "b.service", Enabled: ptr(true)}}
			})},
			new: []cfgOpt{withMC(func(c *refresh.Spec) {
				c.Ignition.Systemd.Units = []ign.Unit{{Name: "b.service", Enabled: ptr(true), Contents: ptr("")}}
			})},
			outcome: refresh.NoChange,
		}),
		Entry("kept: core's absent sshAuthorizedKeys and [] are no change (both write an empty authorized_keys)", rowCase{
			old: []cfgOpt{withPassword(nil)}, new: []cfgOpt{withPassword([]ign.SSHAuthorizedKey{})}, policies: rebootKeys, outcome: refresh.NoChange,
		}),
	)
})
