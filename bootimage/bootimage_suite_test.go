package bootimage_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
)

func TestBootimage(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "bootimage")
}
