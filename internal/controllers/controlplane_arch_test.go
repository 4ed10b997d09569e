package controllers_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	embedding "github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

var _ = Describe("The control plane's architecture, read from the Nodes in the cache", func() {
	DescribeTable("gives a MachineSet without an architecture annotation the control plane's images, whatever the workers run",
		func(role string) {
			bootImageCluster(configv1.AWSPlatformType)
			node := func(name, role, arch string) *corev1.Node {
				return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{role: "", corev1.LabelArchStable: arch}}}
			}
			var nodes []*corev1.Node
			for i := range 5 {
				nodes = append(nodes, node(fmt.Sprintf("worker-%d", i), "node-role.kubernetes.io/worker", "amd64"))
			}
			nodes = append(nodes, node("master-0", role, "arm64"))
			for _, n := range nodes {
				Expect(k8s.Create(ctx, n)).To(Succeed())
				DeferCleanup(k8s.Delete, ctx, n)
			}
			// Without the autoscaler's architecture annotation, as a MachineSet made by hand: on a
			// single-architecture cluster its machines are the control plane's.
			ms := fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
			delete(ms.Annotations, bootimage.ArchAnnotation)
			Expect(fixtures.Create(ctx, k8s, ms)).To(Succeed())
			mgr := startOperator(embedding.Options{Images: staticImages})
			DeferCleanup(mgr.Stop)

			Eventually(amiOf("worker-a")).Should(Equal(fixtures.NewAWSAMIARM64))
		},
		Entry("role control-plane", "node-role.kubernetes.io/control-plane"),
		Entry("the legacy role master", "node-role.kubernetes.io/master"),
	)
})
