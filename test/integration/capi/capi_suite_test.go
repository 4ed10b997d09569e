package capi_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
	ctx = context.Background()
)

func TestCAPI(t *testing.T) {
	testenv.RunSpecs(t, "Cluster API suite: the real kube-apiserver with the cluster-api, CAPA, CAPG and CAPZ CRDs", testenv.Waits{Timeout: 30 * time.Second})
}

var _ = BeforeSuite(func() {
	env = testenv.StartForSpecs(testenv.Options{CAPI: true})
	k8s = env.Client
})

// stored reads obj as the API server holds it now.
func stored(c client.Client, obj *unstructured.Unstructured) *unstructured.Unstructured {
	GinkgoHelper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	Expect(c.Get(context.Background(), client.ObjectKeyFromObject(obj), got)).To(Succeed())
	return got
}
