package bootimage_test

import (
	"testing"

	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestBootimage(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "bootimage")
}
