package controller_test

import (
	"encoding/json"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"github.com/vincent-petithory/dataurl"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
)

// Files of a worker's config that the walk-through changes.
const (
	pullSecretFile = "/var/lib/kubelet/config.json"
	registriesFile = "/etc/containers/registries.conf"
	caBundleFile   = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
	proxyFile      = "/etc/mco/proxy.env"
)

const baseRegistries = `unqualified-search-registries = ["registry.access.redhat.com"]

[[registry]]
  prefix = ""
  location = "quay.io/openshift-release-dev/ocp-release"

  [[registry.mirror]]
    location = "mirror-a.example.com/ocp-release"
`

// Mirrors added to baseRegistries: digest-only is a safe change (reload crio), the other drains.
const (
	safeMirror   = "\n  [[registry.mirror]]\n    location = \"mirror-b.example.com/ocp-release\"\n    pull-from-mirror = \"digest-only\"\n"
	unsafeMirror = "\n  [[registry.mirror]]\n    location = \"mirror-c.example.com/ocp-release\"\n"
)

// worker is the config of a pool's nodes, as the NodePool's inputs make it.
type worker struct {
	pullSecret, registries, sshKey string
	caBundle                       string // none when empty
	proxy                          string // proxy.env, none when empty
	kernelArguments                []string
}

func baseWorker() worker {
	return worker{
		pullSecret: `{"auths":{"quay.io":{"auth":"djE="}}}`, registries: baseRegistries,
		sshKey: "ssh-ed25519 AAAA core@v1", kernelArguments: []string{"systemd.unified_cgroup_hierarchy=1"},
	}
}

func file(path, contents string) ign.File {
	return ign.File{Node: ign.Node{Path: path, Overwrite: ptr.To(true)},
		FileEmbedded1: ign.FileEmbedded1{Contents: ign.Resource{Source: ptr.To(dataurl.EncodeBytes([]byte(contents)))}, Mode: ptr.To(0o644)}}
}

// served is the Ignition config HyperShift's ignition server serves for w: the MachineConfig's
// own files, and the MachineConfig itself as /etc/mcs-machine-config-content.json.
func (w worker) served() []byte {
	ic := ign.Config{Ignition: ign.Ignition{Version: "3.5.0"}}
	ic.Storage.Files = []ign.File{file(pullSecretFile, w.pullSecret), file(registriesFile, w.registries)}
	if w.caBundle != "" {
		ic.Storage.Files = append(ic.Storage.Files, file(caBundleFile, w.caBundle))
	}
	if w.proxy != "" {
		ic.Storage.Files = append(ic.Storage.Files, file(proxyFile, w.proxy))
	}
	ic.Systemd.Units = []ign.Unit{{Name: "kubelet.service", Enabled: ptr.To(true), Contents: ptr.To("[Service]\nExecStart=/usr/bin/kubelet\n")}}
	ic.Passwd.Users = []ign.PasswdUser{{Name: "core", SSHAuthorizedKeys: []ign.SSHAuthorizedKey{ign.SSHAuthorizedKey(w.sshKey)}}}
	mc := &mcfgv1.MachineConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: "rendered-worker"},
		Spec: mcfgv1.MachineConfigSpec{
			OSImageURL: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:aaa", KernelArguments: w.kernelArguments,
			Config: runtime.RawExtension{Raw: mustJSON(ic)},
		},
	}
	servedCfg := ic
	servedCfg.Storage.Files = append(append([]ign.File(nil), ic.Storage.Files...),
		file("/etc/mcs-machine-config-content.json", string(mustJSON(mc))),
		file("/etc/kubernetes/kubeconfig", "kubeconfig"))
	return mustJSON(servedCfg)
}

// encoded is the token Secret's payload key for w.
func (w worker) encoded() []byte {
	s, err := hypershift.EncodePayload(w.served())
	if err != nil {
		panic(err)
	}
	return []byte(s)
}

func mustJSON(v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return out
}
