package steps

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The metrics specs need no cluster: they run here, apart from the envtest suite.
func TestSteps(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "boot image steps")
}
