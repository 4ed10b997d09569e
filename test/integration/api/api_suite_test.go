package api_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	RunSpecs(t, "API suite: the real kube-apiserver and openshift/api CRDs")
}

var _ = BeforeSuite(func() {
	env = testenv.StartForSpecs(testenv.Options{})
	k8s = env.Client
})

var ctx = context.Background()
