package daemonsim

import (
	"encoding/json"
	"slices"
	"testing"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"github.com/vincent-petithory/dataurl"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
)

// node is a node's config as a test writes it: files by path, core's ssh key, kernel arguments
// and one unit.
type node struct {
	files map[string]string
	key   string
	kargs []string
	unit  string
}

func (n node) served(t *testing.T) []byte {
	ic := ign.Config{Ignition: ign.Ignition{Version: "3.5.0"}}
	for p, data := range n.files {
		ic.Storage.Files = append(ic.Storage.Files, ign.File{Node: ign.Node{Path: p},
			FileEmbedded1: ign.FileEmbedded1{Contents: ign.Resource{Source: ptr.To(dataurl.EncodeBytes([]byte(data)))}, Mode: ptr.To(0o644)}})
	}
	ic.Systemd.Units = []ign.Unit{{Name: "kubelet.service", Contents: ptr.To(n.unit)}}
	ic.Passwd.Users = []ign.PasswdUser{{Name: "core", SSHAuthorizedKeys: []ign.SSHAuthorizedKey{ign.SSHAuthorizedKey(n.key)}}}
	raw, err := json.Marshal(ic)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := json.Marshal(&mcfgv1.MachineConfig{TypeMeta: metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig"},
		Spec: mcfgv1.MachineConfigSpec{OSImageURL: "quay.io/os@sha256:aaa", KernelArguments: n.kargs, Config: runtime.RawExtension{Raw: raw}}})
	if err != nil {
		t.Fatal(err)
	}
	ic.Storage.Files = append(ic.Storage.Files, ign.File{Node: ign.Node{Path: "/etc/mcs-machine-config-content.json"},
		FileEmbedded1: ign.FileEmbedded1{Contents: ign.Resource{Source: ptr.To(dataurl.EncodeBytes(mc))}}})
	out, err := json.Marshal(ic)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const (
	registries = "[[registry]]\n  location = \"quay.io/ocp\"\n"
	caBundle   = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
)

// TestRulesAgainstTheLibrary decides each change with the stand-in's own table and checks it
// against the daemon's outcome as the table says; where refresh/hypershift decides today's daemon
// the same change, the two must agree, so neither can drift unseen.
func TestRulesAgainstTheLibrary(t *testing.T) {
	base := node{files: map[string]string{"/var/lib/kubelet/config.json": "a", "/etc/containers/registries.conf": registries},
		key: "ssh-ed25519 A", kargs: []string{"quiet"}, unit: "[Service]\n"}
	with := func(f func(n *node)) node {
		n := base
		n.files = map[string]string{}
		for k, v := range base.files {
			n.files[k] = v
		}
		f(&n)
		return n
	}
	for _, c := range []struct {
		name       string
		next       node
		canRestart bool
		want       string
		actions    []string // run after the write, when Refreshable
	}{
		{"nothing", base, false, NoChange, nil},
		{"pull secret", with(func(n *node) { n.files["/var/lib/kubelet/config.json"] = "b" }), false, Refreshable, nil},
		{"ssh key", with(func(n *node) { n.key = "ssh-ed25519 B" }), false, Refreshable, nil},
		{"digest-only mirror", with(func(n *node) {
			n.files["/etc/containers/registries.conf"] = registries + "  [[registry.mirror]]\n    location = \"m\"\n    pull-from-mirror = \"digest-only\"\n"
		}), false, Refreshable, []string{reloadCrio}},
		{"mirror pulling by tag", with(func(n *node) {
			n.files["/etc/containers/registries.conf"] = registries + "  [[registry.mirror]]\n    location = \"m\"\n"
		}), false, NeedsDrain, nil},
		{"registries.d file", with(func(n *node) { n.files["/etc/containers/registries.d/a.yaml"] = "x" }), false, Refreshable, []string{reloadCrio}},
		{"CA bundle, today's daemon", with(func(n *node) { n.files[caBundle] = "pem" }), false, NeedsReboot, nil},
		{"CA bundle, a daemon that runs Restart", with(func(n *node) { n.files[caBundle] = "pem" }), true, Refreshable, []string{restartCATrust, restartCrio}},
		{"proxy, today's daemon", with(func(n *node) { n.files[proxyEnvFile] = "HTTPS_PROXY=http://p:3128\n" }), false, NeedsReboot, nil},
		{"proxy, a daemon that runs Restart", with(func(n *node) { n.files[proxyEnvFile] = "HTTPS_PROXY=http://p:3128\n" }), true, Refreshable, []string{restartCrio, restartKubelet}},
		{"proxy and CA bundle, a daemon that runs Restart", with(func(n *node) {
			n.files[proxyEnvFile] = "HTTPS_PROXY=http://p:3128\n"
			n.files[caBundle] = "pem"
		}), true, Refreshable, []string{restartCrio, restartKubelet, restartCATrust}},
		{"a file in no table", with(func(n *node) { n.files["/etc/motd"] = "hi" }), false, NeedsReboot, nil},
		{"a unit", with(func(n *node) { n.unit = "[Service]\nNice=1\n" }), false, NeedsReboot, nil},
		{"kernel arguments", with(func(n *node) { n.kargs = []string{"quiet", "nosmt"} }), false, NeedsReboot, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			current, next := base.served(t), c.next.served(t)
			got, err := decide(current, next, c.canRestart)
			if err != nil {
				t.Fatal(err)
			}
			if got.outcome != c.want {
				t.Fatalf("the stand-in decides %s (%s), the table says %s", got.outcome, got.why, c.want)
			}
			if c.want == Refreshable && !slices.Equal(got.actions, c.actions) {
				t.Fatalf("the stand-in runs %q, the table says %q", got.actions, c.actions)
			}
			if c.canRestart {
				return
			}
			lib, err := hypershift.DecideRefresh(current, next)
			if err != nil {
				t.Fatal(err)
			}
			if lib.Reason != got.outcome {
				t.Fatalf("refresh/hypershift decides %s (%s), the daemon's table %s (%s)", lib.Reason, lib.Message, got.outcome, got.why)
			}
		})
	}
}
