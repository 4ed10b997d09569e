package capi_test

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
	ctx = context.Background()
)

func TestCAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	RunSpecs(t, "Cluster API suite: the real kube-apiserver with the cluster-api, CAPA, CAPG and CAPZ CRDs")
}

var _ = BeforeSuite(func() {
	env = testenv.StartForSpecs(testenv.Options{CAPI: true})
	k8s = env.Client
})
