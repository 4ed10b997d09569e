package main

import (
	"bytes"
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Every file flag reads - as stdin, as kubectl's do, and no document of a file is left unread.
var _ = Describe("The CLI's file flags", func() {
	write := specFiles()
	const empty = `{"ignition":{"version":"3.2.0"}}`
	const policyJSON = `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/containers/policy.json","contents":{"source":"data:,%7B%7D"}}]}}`
	withStdin := func(stdin string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := runWithStdin(context.Background(), strings.NewReader(stdin), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	It("reads --new - from stdin", func() {
		code, out, stderr := withStdin(policyJSON, "refresh", "plan", "--old", write("old.json", empty), "--new", "-")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Outcome: InPlace"))
		Expect(out).To(ContainSubstring("/etc/containers/policy.json"))
	})

	It("reads --old - from stdin, and --policies - too", func() {
		code, out, _ := withStdin(empty, "refresh", "plan", "--old", "-", "--new", write("new.json", policyJSON))
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Outcome: InPlace"))
		policies := "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec: {}\n"
		code, _, stderr := withStdin(policies, "refresh", "plan", "--old", write("old.json", empty), "--new", write("new.json", policyJSON), "--policies", "-")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
	})

	It("refuses two flags reading stdin, naming both", func() {
		code, _, stderr := withStdin(empty, "refresh", "plan", "--old", "-", "--new", "-")
		Expect(code).To(Equal(exitUnusable))
		Expect(stderr).To(ContainSubstring("--old - and --new - both read stdin"))
	})

	It("refuses a file of two documents where one is read, rather than reading the first", func() {
		two := write("two.yaml", empty+"\n---\n"+policyJSON+"\n")
		code, out, stderr := runCLI("refresh", "plan", "--old", write("old.json", empty), "--new", two)
		Expect(code).To(Equal(exitUnusable))
		Expect(out).To(BeEmpty())
		Expect(stderr).To(ContainSubstring(two + " holds 2 documents: --new takes one"))
	})

	It("takes comments and blank documents around the one document", func() {
		padded := write("padded.yaml", "# the node's config\n---\n"+policyJSON+"\n---\n")
		code, out, _ := runCLI("refresh", "plan", "--old", write("old.json", empty), "--new", padded)
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("/etc/containers/policy.json"))
	})
})
