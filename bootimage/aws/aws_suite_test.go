package aws_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	// Decide finds the platforms in their registry.
	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
)

func TestAWS(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "bootimage/aws")
}
