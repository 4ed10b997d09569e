package testenv

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// StartForSpecs starts a control plane from a Ginkgo setup node (BeforeSuite or BeforeAll) and
// stops it when that node's specs are done.
func StartForSpecs(opts Options) *Env {
	ginkgo.GinkgoHelper()
	env, err := Start(opts)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(env.Stop)
	return env
}
