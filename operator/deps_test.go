package operator_test

import (
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("What an embedder links", func() {
	It("leaves the Google Cloud SDK out unless gcp.New is registered", func() {
		out, err := exec.Command("go", "list", "-deps", "github.com/bootimage-operator/bootimage-operator/operator").Output()
		Expect(err).NotTo(HaveOccurred())
		deps := strings.Fields(string(out))
		Expect(deps).To(ContainElement("github.com/bootimage-operator/bootimage-operator/controllers"), "the list is the operator's")
		for _, dep := range deps {
			Expect(dep).NotTo(Or(HavePrefix("cloud.google.com/"), HavePrefix("google.golang.org/api")), "linked without being asked for")
		}
	})
})
