package vspherecloud_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestVSphereCloud(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "vspherecloud: govmomi against vcsim")
}

var ctx = context.Background()
