package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("bootimagectl refresh plan", func() {
	write := specFiles()

	It("prints the outcome, ordered actions and each change's rule as JSON", func() {
		old := write("old.json", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/containers/policy.json","contents":{"source":"data:,%7B%7D"}}]}}`)
		updated := write("new.yaml", `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: rendered-worker-2}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
      - path: /etc/containers/policy.json
        contents: {source: "data:;base64,eyJkZWZhdWx0IjpbXX0="}
      - path: /etc/kubernetes/credential-providers/ecr.yaml
        contents: {source: "data:,x"}
`)
		code, out, stderr := runCLI("refresh", "plan", "--old", old, "--new", updated, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(MatchJSON(`{
  "outcome": "InPlace",
  "actions": [{"type": "Reload", "unit": "crio.service"}, {"type": "Restart", "unit": "kubelet.service"}],
  "changes": [
    {"kind": "file", "name": "/etc/containers/policy.json", "decision": "InPlace", "rule": "file policy /etc/containers/policy.json: Reload",
     "actions": [{"type": "Reload", "unit": "crio.service"}]},
    {"kind": "file", "name": "/etc/kubernetes/credential-providers/ecr.yaml", "decision": "InPlace", "rule": "file policy /etc/kubernetes/credential-providers: Restart",
     "actions": [{"type": "Restart", "unit": "kubelet.service"}]}
  ]
}`))
	})

	// appConfigChange writes an empty config, one that adds /etc/app/app.conf, and
	// MachineConfiguration/cluster with one file policy.
	appConfigChange := func(policyPath, actions string) (old, updated, policies string) {
		old = write("old.json", `{"ignition":{"version":"3.2.0"}}`)
		updated = write("new.json", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/app/app.conf","contents":{"source":"data:,x"}}]}}`)
		policies = write("mc.yaml", "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\n"+
			"spec:\n  nodeDisruptionPolicy:\n    files:\n    - path: "+policyPath+"\n      actions: "+actions+"\n")
		return old, updated, policies
	}

	It("takes file decisions from --no-reboot-paths, and user policies from --policies", func() {
		old, updated, policies := appConfigChange("/etc/app", "[{type: Restart, restart: {serviceName: app.service}}]")
		code, out, _ := runCLI("refresh", "plan", "--old", old, "--new", updated, "--policies", policies)
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Outcome: InPlace"))
		Expect(out).To(ContainSubstring("Action:  Restart app.service"))

		paths := write("paths.json", `[{"path":"/etc/app/","action":"Restart","services":["app"]}]`)
		code, out, _ = runCLI("refresh", "plan", "--old", old, "--new", updated, "--no-reboot-paths", paths)
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Outcome: Reboot"), "app.service is not in the allowlist without the policies")
	})

	It("prints no line with trailing spaces, a Drain included", func() {
		old, updated, policies := appConfigChange("/etc/app/", "[{type: Drain}, {type: Reload, reload: {serviceName: app.service}}]")
		code, out, _ := runCLI("refresh", "plan", "--old", old, "--new", updated, "--policies", policies)
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Action:  Drain\nAction:  Reload app.service\n"))
		for _, line := range strings.Split(out, "\n") {
			Expect(line).NotTo(HaveSuffix(" "), "line %q", line)
		}
	})

	DescribeTable("exits 2 on unusable input",
		func(args func() []string, message string) {
			code, _, stderr := runCLI(args()...)
			Expect(code).To(Equal(2))
			Expect(stderr).To(ContainSubstring(message))
		},
		Entry("no input", func() []string { return []string{"refresh", "plan"} }, "give -f FILE or --delete NAME to preview a MachineConfig on the cluster, or --old FILE --new FILE"),
		Entry("--old without --new", func() []string { return []string{"refresh", "plan", "--old", "a.json"} }, "--old and --new are required together"),
		Entry("spec 2 Ignition", func() []string {
			p := write("v2.json", `{"ignition":{"version":"2.2.0"}}`)
			return []string{"refresh", "plan", "--old", p, "--new", p}
		}, `unsupported Ignition version "2.2.0"`),
		Entry("an invalid policy", func() []string {
			p := write("ok.json", `{"ignition":{"version":"3.2.0"}}`)
			mc := write("mc.yaml", "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    units: [{name: crio, actions: [{type: None}]}]\n")
			return []string{"refresh", "plan", "--old", p, "--new", p, "--policies", mc}
		}, `invalid service name "crio"`),
		// Upstream: test/extended-priv/mco_nodedisruptionpolicy.go, PolarionID:73489 (MachineConfigurations is only effective with name cluster).
		Entry("policies in a MachineConfiguration not named cluster", func() []string {
			p := write("ok.json", `{"ignition":{"version":"3.2.0"}}`)
			mc := write("mc.yaml", "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: iminvalid}\nspec:\n  nodeDisruptionPolicy:\n    files: [{path: /etc/motd, actions: [{type: None}]}]\n")
			return []string{"refresh", "plan", "--old", p, "--new", p, "--policies", mc}
		}, `MachineConfiguration "iminvalid" is not read by the MCO: node disruption policies must be in the one named cluster`),
		Entry("a --policies file of another kind", func() []string {
			p := write("ok.json", `{"ignition":{"version":"3.2.0"}}`)
			mc := write("mc.yaml", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: cluster}\n")
			return []string{"refresh", "plan", "--old", p, "--new", p, "--policies", mc}
		}, "not a MachineConfiguration: kind is MachineConfig"),
		Entry("a gzip bomb in a file's contents", func() []string {
			old := write("old.json", `{"ignition":{"version":"3.2.0"}}`)
			bomb := write("bomb.json", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"compression":"gzip","source":"data:;base64,`+gzipBombBase64()+`"}}]}}`)
			return []string{"refresh", "plan", "--old", old, "--new", bomb}
		}, "file /etc/motd: contents: gzip data expands to more than 64 MiB"),
	)
})

// gzipBombBase64 is 65 MiB of zeros, gzipped (about 64 KiB) and base64-encoded.
func gzipBombBase64() string {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	Expect(err).NotTo(HaveOccurred())
	zeros := make([]byte, 1<<20)
	for range 65 {
		_, err = zw.Write(zeros)
		Expect(err).NotTo(HaveOccurred())
	}
	Expect(zw.Close()).To(Succeed())
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}
