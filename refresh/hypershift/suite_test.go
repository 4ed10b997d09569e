package hypershift_test

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"testing"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

func TestHyperShift(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "refresh/hypershift")
}

const (
	registriesConf       = "/etc/containers/registries.conf"
	maxDecompressedBytes = 64 << 20
	registriesV1         = `unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]

[[registry]]
  prefix = ""
  location = "quay.io/openshift-release-dev/ocp-release"

  [[registry.mirror]]
    location = "mirror-a.example.com/ocp-release"
`
)

var (
	defaults    = refresh.DefaultPolicies()
	reloadCrio  = refresh.Action{Type: refresh.ActionReload, Unit: "crio.service"}
	restartCrio = refresh.Action{Type: refresh.ActionRestart, Unit: "crio.service"}
	drain       = refresh.Action{Type: refresh.ActionDrain}
)

// Encodings of file contents.
func b64(s string) string { return "data:;base64," + base64.StdEncoding.EncodeToString([]byte(s)) }
func pct(s string) string { return "data:," + url.PathEscape(s) }

func ptr[T any](v T) *T { return &v }

// nodeSpec is a node config as the tests build it: Ignition plus the MachineConfig fields.
type nodeSpec struct {
	Ignition        ign.Config
	OSImageURL      string
	KernelArguments []string
}

func config(opts ...func(*nodeSpec)) refresh.Config {
	GinkgoHelper()
	s := nodeSpec{Ignition: ign.Config{Ignition: ign.Ignition{Version: "3.5.0"}}, OSImageURL: "quay.io/openshift/rhcos@sha256:aaa"}
	for _, o := range opts {
		o(&s)
	}
	raw, err := json.Marshal(s.Ignition)
	Expect(err).NotTo(HaveOccurred())
	c, err := refresh.FromMachineConfig(&mcfgv1.MachineConfig{Spec: mcfgv1.MachineConfigSpec{
		OSImageURL: s.OSImageURL, KernelArguments: s.KernelArguments, Config: runtime.RawExtension{Raw: raw},
	}})
	Expect(err).NotTo(HaveOccurred())
	return c
}

func withFile(path, source string, mode int) func(*nodeSpec) {
	return func(c *nodeSpec) {
		c.Ignition.Storage.Files = append(c.Ignition.Storage.Files, ign.File{Node: ign.Node{Path: path},
			FileEmbedded1: ign.FileEmbedded1{Contents: ign.Resource{Source: ptr(source)}, Mode: ptr(mode)}})
	}
}

func dir(path string) ign.Directory { return ign.Directory{Node: ign.Node{Path: path}} }
