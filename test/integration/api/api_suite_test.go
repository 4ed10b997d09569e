package api_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
)

func TestAPI(t *testing.T) {
	testenv.RunSpecs(t, "API suite: the real kube-apiserver and openshift/api CRDs", testenv.Waits{Timeout: 30 * time.Second})
}

var _ = BeforeSuite(func() {
	env = testenv.StartForSpecs(testenv.Options{})
	k8s = env.Client
})

var ctx = context.Background()
