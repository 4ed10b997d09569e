package refresh_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

var _ = Describe("Parse", func() {
	It("reads a MachineConfig in YAML with an Ignition 3.2 config", func() {
		cfg, err := refresh.Parse([]byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-ssh
spec:
  osImageURL: quay.io/openshift/rhcos@sha256:aaa
  kernelArguments: [nosmt]
  fips: true
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/motd
        contents:
          source: data:,hello
`))
		Expect(err).NotTo(HaveOccurred())
		spec := refresh.SpecOf(cfg)
		Expect(spec.OSImageURL).To(Equal("quay.io/openshift/rhcos@sha256:aaa"))
		Expect(spec.KernelArguments).To(Equal([]string{"nosmt"}))
		Expect(spec.FIPS).To(BeTrue())
		Expect(spec.Ignition.Storage.Files).To(HaveLen(1))
		Expect(spec.Ignition.Ignition.Version).To(Equal(refresh.IgnitionVersion))
	})

	It("reads bare Ignition of any 3.x version", func() {
		cfg, err := refresh.Parse([]byte(`{"ignition":{"version":"3.0.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}]}}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(refresh.SpecOf(cfg).Ignition.Passwd.Users).To(HaveLen(1))
	})

	It("refuses a missing MachineConfig instead of deciding on an empty one", func() {
		_, err := refresh.FromMachineConfig(nil)
		Expect(err).To(MatchError("no MachineConfig"))
	})

	DescribeTable("says what is wrong",
		func(raw, message string) {
			_, err := refresh.Parse([]byte(raw))
			Expect(err).To(MatchError(ContainSubstring(message)))
			Expect(err.Error()).NotTo(Or(HaveSuffix(" "), ContainSubstring("  ")))
		},
		Entry("spec 2", `{"ignition":{"version":"2.2.0"}}`, `unsupported Ignition version "2.2.0": only spec 3.0.0 to 3.5.0 can be read, as in the MCO`),
		Entry("spec 3.6, which the MCO does not read either", `{"ignition":{"version":"3.6.0"}}`, `unsupported Ignition version "3.6.0": only spec 3.0.0 to 3.5.0`),
		Entry("spec 3.6 experimental", `{"ignition":{"version":"3.6.0-experimental"}}`, `unsupported Ignition version "3.6.0-experimental"`),
		Entry("spec 4", `{"ignition":{"version":"4.0.0"}}`, `unsupported Ignition version "4.0.0"`),
		Entry("not a config", `{"apiVersion":"v1","kind":"ConfigMap"}`, "neither a MachineConfig nor an Ignition config"),
		Entry("not JSON", `[1, 2`, "not YAML or JSON"),
	)
})
