package hypershift_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
)

// Documents of the MCO raw config as HyperShift's NodePool config tests (3ee96155, config_test.go)
// expect generateMCORawConfig to produce them.
const (
	userMachineConfig = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  creationTimestamp: null
  labels:
    machineconfiguration.openshift.io/role: worker
  name: config-1
spec:
  baseOSExtensionsContainerImage: ""
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - contents: null
        filesystem: root
        mode: 493
        path: /usr/local/bin/file1.sh
        source: |-
          [Service]
          Type=oneshot
          ExecStart=/usr/bin/echo Hello World

          [Install]
          WantedBy=multi-user.target
  extensions: null
  fips: false
  kernelArguments: null
  kernelType: ""
  osImageURL: ""
`
	runcContainerRuntimeConfig = `apiVersion: machineconfiguration.openshift.io/v1
kind: ContainerRuntimeConfig
metadata:
  creationTimestamp: null
  name: set-runc
spec:
  containerRuntimeConfig:
    defaultRuntime: runc
  machineConfigPoolSelector:
    matchLabels:
      machineconfiguration.openshift.io/mco-built-in: ""
status:
  conditions: null
`
	// globalConfigString for an empty proxy and image config, and from 4.23 with no TLS profile.
	globalConfig        = `{"metadata":{"name":"cluster","creationTimestamp":null},"spec":{"trustedCA":{"name":""}},"status":{}}` + "\n" + `{"metadata":{"name":"cluster","creationTimestamp":null},"spec":{"additionalTrustedCA":{"name":""},"registrySources":{}},"status":{}}` + "\n"
	globalConfigWithTLS = globalConfig + "null\n"
)

// sshKeyDocument is the 99-worker-ssh MachineConfig as the control plane operator writes it and
// generateMCORawConfig re-encodes it.
func sshKeyDocument(key string) string {
	return `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  creationTimestamp: null
  labels:
    machineconfiguration.openshift.io/role: worker
  name: 99-worker-ssh
spec:
  baseOSExtensionsContainerImage: ""
  config:
    ignition:
      version: 3.2.0
    passwd:
      users:
      - name: core
        sshAuthorizedKeys:
        - ` + key + `
  extensions: null
  fips: false
  kernelArguments: null
  kernelType: ""
  osImageURL: ""
`
}

// imageMirrorDocument is the ImageDigestMirrorSet of the ignition-config-40-image-content-source
// ConfigMap for one source and its mirrors.
func imageMirrorDocument(source string, mirrors ...string) string {
	doc := `apiVersion: config.openshift.io/v1
kind: ImageDigestMirrorSet
metadata:
  creationTimestamp: null
  labels:
    machineconfiguration.openshift.io/role: worker
  name: cluster
spec:
  imageDigestMirrors:
  - mirrors:
`
	for _, m := range mirrors {
		doc += "    - " + m + "\n"
	}
	return doc + "    source: " + source + "\nstatus: {}\n"
}

// rawConfig joins documents as generateMCORawConfig does: sorted, "\n---\n" between them.
func rawConfig(docs ...string) string {
	docs = append([]string(nil), docs...)
	sort.Strings(docs)
	return strings.Join(docs, "\n---\n")
}

// hashCase is one input set of HyperShift's NodePool config tests with the hashes they assert.
type hashCase struct {
	name                     string
	in                       hypershift.Inputs
	hash, hashWithoutVersion string
}

// hyperShiftCases are the 16 input sets of TestNewConfigGenerator (the 9 that produce hashes) and
// TestHash/TestHashWithoutVersion (7), with the values HyperShift asserts for them.
func hyperShiftCases() []hashCase {
	base := hypershift.Inputs{ReleaseVersion: "4.18.0", PullSecretName: "pull-secret", GlobalConfig: globalConfig}
	v5 := base
	v5.ReleaseVersion, v5.GlobalConfig = "5.0.0", globalConfigWithTLS
	with := func(in hypershift.Inputs, change func(*hypershift.Inputs)) hypershift.Inputs {
		change(&in)
		return in
	}
	unit := hypershift.Inputs{MCORawConfig: "test config", ReleaseVersion: "4.7.0", PullSecretName: "pull-secret", AdditionalTrustBundleName: "trust-bundle", GlobalConfig: "global config"}
	return []hashCase{
		{"NewConfigGenerator: all input given", base, "83935368", "0db5756d"},
		{"NewConfigGenerator: a NodePool config", with(base, func(in *hypershift.Inputs) { in.MCORawConfig = userMachineConfig }), "af67f27c", "fef02451"},
		{"NewConfigGenerator: 4.18.0, no osImageStream", base, "83935368", "0db5756d"},
		{"NewConfigGenerator: osImageStream the version's default", base, "83935368", "0db5756d"},
		{"NewConfigGenerator: osImageStream not the default", with(v5, func(in *hypershift.Inputs) { in.RHELStream = "rhel-9" }), "3d08ada8", "3a158178"},
		{"NewConfigGenerator: 5.0.0, no osImageStream", v5, "bc411add", "0db5756d"},
		{"NewConfigGenerator: rhel-10 on 5.0.0", v5, "bc411add", "0db5756d"},
		{"NewConfigGenerator: runc on 5.0.0, rhel-9", with(v5, func(in *hypershift.Inputs) { in.MCORawConfig = runcContainerRuntimeConfig }), "ff007b24", "6d5a7b66"},
		{"NewConfigGenerator: runc on 5.0.0, no osImageStream", with(v5, func(in *hypershift.Inputs) { in.MCORawConfig = runcContainerRuntimeConfig }), "ff007b24", "6d5a7b66"},
		{"NewConfigGenerator: additionalTrustBundle", with(base, func(in *hypershift.Inputs) {
			in.MCORawConfig, in.PullSecretName, in.AdditionalTrustBundleName = userMachineConfig, "pull-secret-2", "additional-trust-bundle"
		}), "632801f8", "71375893"},
		{"Hash: base case", unit, "bb196408", "85234650"},
		{"Hash: another version", with(unit, func(in *hypershift.Inputs) { in.ReleaseVersion = "4.8.0" }), "27bb7699", "85234650"},
		{"Hash: another mcoRawConfig", with(unit, func(in *hypershift.Inputs) { in.MCORawConfig = "different" }), "25f99ac5", "5ea671c5"},
		{"Hash: another pullSecretName", with(unit, func(in *hypershift.Inputs) { in.PullSecretName = "different" }), "d0d6f6e9", "f6e82eb7"},
		{"Hash: another trust bundle", with(unit, func(in *hypershift.Inputs) { in.AdditionalTrustBundleName = "different" }), "42d42744", "935c3492"},
		{"Hash: another globalConfig", with(unit, func(in *hypershift.Inputs) { in.GlobalConfig = "different" }), "e916ddfe", "85234650"},
		{"Hash: a non-default rhelStream", with(unit, func(in *hypershift.Inputs) { in.RHELStream = "rhel-10" }), "2dbbd41b", "671fe083"},
	}
}

// For each of HyperShift's 16 input sets: its hashes are reproduced, and after a payload-only
// change (the pull secret renamed; an ssh key set) HyperShift's own hashes move while the targets
// with the split adopted stay. `go test -run TestPayloadOnlyChangeKeepsTargets -v` prints the table.
func TestPayloadOnlyChangeKeepsTargets(t *testing.T) {
	cases := hyperShiftCases()
	if len(cases) != 17 { // two sets of TestNewConfigGenerator are the same inputs: 16 distinct
		t.Fatalf("%d cases", len(cases))
	}
	t.Logf("| input set | Hash() | HashWithoutVersion() | pull secret renamed: HyperShift Hash / split target / split HWV | ssh key set: HyperShift Hash / split target / split HWV |")
	t.Logf("|---|---|---|---|---|")
	for _, c := range cases {
		if got := hypershift.Hash(c.in); got != c.hash {
			t.Errorf("%s: Hash %s, HyperShift asserts %s", c.name, got, c.hash)
		}
		if got := hypershift.HashWithoutVersion(c.in); got != c.hashWithoutVersion {
			t.Errorf("%s: HashWithoutVersion %s, HyperShift asserts %s", c.name, got, c.hashWithoutVersion)
		}
		adopted := hypershift.NextTargets(nil, c.in, true)
		if adopted.Hash != c.hash || adopted.HashWithoutVersion != c.hashWithoutVersion || adopted.Rolls {
			t.Errorf("%s: adoption moved the targets: %+v", c.name, adopted)
		}
		row := fmt.Sprintf("| %s | %s | %s |", c.name, c.hash, c.hashWithoutVersion)
		for _, change := range []func(*hypershift.Inputs){
			func(in *hypershift.Inputs) { in.PullSecretName += "-rotated" },
			func(in *hypershift.Inputs) {
				docs := []string{sshKeyDocument("ssh-ed25519 AAAA core@new")}
				if in.MCORawConfig != "" {
					docs = append(docs, strings.Split(in.MCORawConfig, "\n---\n")...)
				}
				in.MCORawConfig = rawConfig(docs...)
			},
		} {
			in := c.in
			change(&in)
			next := hypershift.NextTargets(&adopted.Record, in, true)
			if hypershift.Hash(in) == c.hash {
				t.Errorf("%s: the change does not move HyperShift's hash", c.name)
			}
			if next.Hash != c.hash || next.HashWithoutVersion != c.hashWithoutVersion || next.Rolls || next.Record != adopted.Record {
				t.Errorf("%s: a payload-only change moved the targets: %+v", c.name, next)
			}
			row += fmt.Sprintf(" %s / %s / %s |", hypershift.Hash(in), next.Hash, next.HashWithoutVersion)
		}
		t.Log(row)
	}
}

var _ = Describe("Taking HyperShift's inputs apart", func() {
	ssh := sshKeyDocument("ssh-ed25519 AAAA core@old")
	mirrors := imageMirrorDocument("quay.io/openshift-release-dev/ocp-release", "mirror-a.example.com/ocp-release")
	in := hypershift.Inputs{
		MCORawConfig: rawConfig(userMachineConfig, ssh, mirrors), ReleaseVersion: "4.18.0",
		PullSecretName: "pull-secret", AdditionalTrustBundleName: "user-ca-bundle", GlobalConfig: globalConfig,
	}
	split := hypershift.SplitInputs(in, hypershift.Contents{PullSecret: []byte(`{"auths":{}}`)})

	DescribeTable("keeps the rollout side on a payload-only change, and moves the payload hash",
		func(change func(*hypershift.Inputs, *hypershift.Contents)) {
			next, contents := in, hypershift.Contents{PullSecret: []byte(`{"auths":{}}`)}
			change(&next, &contents)
			got := hypershift.SplitInputs(next, contents)
			Expect(got.Rollout).To(Equal(split.Rollout))
			Expect(got.Config).To(Equal(split.Config))
			Expect(got.Payload).NotTo(Equal(split.Payload))
		},
		Entry("the ssh key", func(n *hypershift.Inputs, _ *hypershift.Contents) {
			n.MCORawConfig = rawConfig(userMachineConfig, sshKeyDocument("ssh-ed25519 BBBB core@new"), mirrors)
		}),
		Entry("the image mirrors", func(n *hypershift.Inputs, _ *hypershift.Contents) {
			n.MCORawConfig = rawConfig(userMachineConfig, ssh, imageMirrorDocument("quay.io/openshift-release-dev/ocp-release", "mirror-b.example.com/ocp-release"))
		}),
		Entry("image mirrors appearing", func(n *hypershift.Inputs, _ *hypershift.Contents) {
			n.MCORawConfig = rawConfig(userMachineConfig, ssh)
		}),
		Entry("the pull secret's name", func(n *hypershift.Inputs, _ *hypershift.Contents) { n.PullSecretName = "pull-secret-2" }),
		Entry("the pull secret's contents under the same name", func(_ *hypershift.Inputs, c *hypershift.Contents) {
			c.PullSecret = []byte(`{"auths":{"quay.io":{}}}`)
		}),
		Entry("the trust bundle's contents", func(_ *hypershift.Inputs, c *hypershift.Contents) { c.AdditionalTrustBundle = []byte("-----BEGIN") }),
		Entry("the proxy", func(n *hypershift.Inputs, _ *hypershift.Contents) {
			n.GlobalConfig = strings.Replace(globalConfig, `"trustedCA":{"name":""}`, `"httpProxy":"http://proxy:3128","trustedCA":{"name":""}`, 1)
		}),
	)

	DescribeTable("moves the rollout side on anything else",
		func(change func(*hypershift.Inputs), configToo bool) {
			next := in
			change(&next)
			got := hypershift.SplitInputs(next, hypershift.Contents{PullSecret: []byte(`{"auths":{}}`)})
			Expect(got.Rollout).NotTo(Equal(split.Rollout))
			Expect(got.Config != split.Config).To(Equal(configToo))
			Expect(got.Payload).To(Equal(split.Payload))
		},
		Entry("a user MachineConfig", func(n *hypershift.Inputs) {
			n.MCORawConfig = rawConfig(withKernelArgument(userMachineConfig, "nosmt"), ssh, mirrors)
		}, true),
		Entry("another document named 99-worker-ssh but not a MachineConfig", func(n *hypershift.Inputs) {
			n.MCORawConfig = rawConfig(userMachineConfig, ssh, mirrors, strings.Replace(runcContainerRuntimeConfig, "set-runc", "99-worker-ssh", 1))
		}, true),
		Entry("a document that does not parse", func(n *hypershift.Inputs) { n.MCORawConfig += "\n---\n{" }, true),
		Entry("the RHEL stream", func(n *hypershift.Inputs) { n.RHELStream = "rhel-10" }, true),
		Entry("the release version", func(n *hypershift.Inputs) { n.ReleaseVersion = "4.18.1" }, false),
		Entry("the TLS profile", func(n *hypershift.Inputs) { n.GlobalConfig += `{"type":"Modern"}` + "\n" }, false),
	)

	It("keeps a global config not in globalConfigString's shape whole on the rollout side", func() {
		next := in
		next.GlobalConfig = "global config"
		got := hypershift.SplitInputs(next, hypershift.Contents{})
		next.GlobalConfig = "global config 2"
		Expect(hypershift.SplitInputs(next, hypershift.Contents{}).Rollout).NotTo(Equal(got.Rollout))
	})

	Describe("choosing the targets", func() {
		adopted := hypershift.NextTargets(nil, in, true)

		It("adopts HyperShift's own values, and writes nothing on the next reconcile", func() {
			Expect(adopted.Hash).To(Equal(hypershift.Hash(in)))
			Expect(adopted.HashWithoutVersion).To(Equal(hypershift.HashWithoutVersion(in)))
			Expect(adopted.Rolls).To(BeFalse())
			again := hypershift.NextTargets(&adopted.Record, in, true)
			Expect(again.Record).To(Equal(adopted.Record))
		})

		It("keeps HashWithoutVersion on a release upgrade, so it is not reported as a config update", func() {
			renamed := in
			renamed.PullSecretName = "pull-secret-2"
			pinned := hypershift.NextTargets(&adopted.Record, renamed, true)
			upgraded := renamed
			upgraded.ReleaseVersion = "4.18.1"
			next := hypershift.NextTargets(&pinned.Record, upgraded, true)
			Expect(next.Hash).To(Equal(hypershift.Hash(upgraded)))
			Expect(next.Rolls).To(BeTrue())
			Expect(next.HashWithoutVersion).To(Equal(adopted.HashWithoutVersion))
		})

		It("moves both on a config change", func() {
			changed := in
			changed.MCORawConfig = rawConfig(withKernelArgument(userMachineConfig, "nosmt"), ssh, mirrors)
			next := hypershift.NextTargets(&adopted.Record, changed, true)
			Expect(next.Hash).To(Equal(hypershift.Hash(changed)))
			Expect(next.HashWithoutVersion).To(Equal(hypershift.HashWithoutVersion(changed)))
			Expect(next.Rolls).To(BeTrue())
		})

		It("rolls out a payload change the refresh cannot deliver", func() {
			rotated := in
			rotated.MCORawConfig = rawConfig(userMachineConfig, sshKeyDocument("ssh-ed25519 BBBB core@new"), mirrors)
			Expect(hypershift.NextTargets(&adopted.Record, rotated, true).Rolls).To(BeFalse())
			next := hypershift.NextTargets(&adopted.Record, rotated, false)
			Expect(next.Hash).To(Equal(hypershift.Hash(rotated)))
			Expect(next.HashWithoutVersion).To(Equal(hypershift.HashWithoutVersion(rotated)))
			Expect(next.Rolls).To(BeTrue())
			Expect(hypershift.NextTargets(&next.Record, rotated, false).Rolls).To(BeFalse(), "once rolled, nothing is pending")
		})

		It("reads and writes the record annotation, and says what is wrong with a bad one", func() {
			got, err := hypershift.ParseRecord(adopted.Record.String())
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(adopted.Record))
			for _, bad := range []string{"", "6669fa99", "a/b/c", "a/b/c/", "a/b/c/d/e"} {
				_, err := hypershift.ParseRecord(bad)
				Expect(err).To(MatchError(ContainSubstring("is not <hash>/<hashWithoutVersion>/<rollout>/<config>")), bad)
			}
		})
	})
})

// withKernelArgument is a MachineConfig document with one more kernel argument.
func withKernelArgument(doc, arg string) string {
	return strings.Replace(doc, "kernelArguments: null", "kernelArguments:\n  - "+arg, 1)
}
