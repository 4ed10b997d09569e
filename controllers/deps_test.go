package controllers_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

const module = "github.com/bootimage-operator/bootimage-operator"

var _ = Describe("What an embedder links", func() {
	It("leaves the Google Cloud SDK out unless gcp.New is registered", func() {
		out, err := exec.Command("go", "list", "-deps", module+"/controllers").Output()
		Expect(err).NotTo(HaveOccurred())
		deps := strings.Fields(string(out))
		Expect(deps).To(ContainElement(module+"/internal/controllers"), "the list is the operator's")
		for _, dep := range deps {
			Expect(dep).NotTo(Or(HavePrefix("cloud.google.com/"), HavePrefix("google.golang.org/api")), "linked without being asked for")
		}
	})

	It("reaches the controllers through this package alone, tests included", func() {
		out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, module+"/...").Output()
		Expect(err).NotTo(HaveOccurred())
		var importers []string
		for line := range strings.Lines(string(out)) {
			fields := strings.Fields(line)
			pkg := fields[0]
			if !strings.HasPrefix(pkg, module+"/internal/") && pkg != module+"/controllers" {
				Expect(pkg).NotTo(Or(HaveSuffix("/controllers"), ContainSubstring("/controllers/")), "a second public controllers package")
			}
			if slices.Contains(fields[1:], module+"/internal/controllers") && pkg != module+"/internal/controllers" {
				importers = append(importers, pkg)
			}
		}
		Expect(importers).To(ConsistOf(module + "/controllers"))
	})
})

var _ = Describe("The module's packages", func() {
	It("each say what they are under their own name", func() {
		out, err := exec.Command("go", "list", "-f", `{{if and .GoFiles (ne .Name "main")}}{{.ImportPath}}|{{.Name}}|{{.Doc}}{{end}}`, module+"/...").Output()
		Expect(err).NotTo(HaveOccurred())
		var wrong []string
		for line := range strings.Lines(string(out)) {
			path, rest, _ := strings.Cut(strings.TrimSpace(line), "|")
			name, doc, _ := strings.Cut(rest, "|")
			if !strings.HasPrefix(doc, "Package "+name+" ") {
				wrong = append(wrong, fmt.Sprintf("%s (package %s): %q", path, name, doc))
			}
		}
		Expect(wrong).To(BeEmpty(), "a package doc must start \"Package <name> \"")
	})
})
