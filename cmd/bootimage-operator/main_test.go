package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

func TestOperator(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	RunSpecs(t, "bootimage-operator process")
}

var _ = Describe("Startup failures", func() {
	DescribeTable("return a one-line reason",
		func(args []string, message string) {
			err := run(context.Background(), args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("a missing kubeconfig", []string{"--kubeconfig", "/nonexistent/kubeconfig"}, "loading kubeconfig /nonexistent/kubeconfig"),
		Entry("an unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"),
		Entry("stray arguments", []string{"extra"}, `unexpected arguments ["extra"]`),
	)
})

var _ = Describe("The manager on a real API server", Ordered, func() {
	var env *testenv.Env
	BeforeAll(func() {
		var err error
		env, err = testenv.Start(testenv.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
	})

	It("serves probes, holds the Lease while running and releases it on shutdown", func() {
		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
		probe := freeAddress()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"--kubeconfig", kubeconfig, "--release-version", "4.20.3",
				"--metrics-bind-address", "0", "--health-probe-bind-address", probe})
		}()
		stopped := false
		DeferCleanup(func() {
			cancel()
			if !stopped {
				<-done
			}
		})

		Eventually(func() (int, error) {
			resp, err := http.Get(fmt.Sprintf("http://%s/healthz", probe))
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			return resp.StatusCode, nil
		}).Should(Equal(http.StatusOK))

		lease := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: leaseNS, Name: leaseName}
		Eventually(func() string {
			if err := env.Client.Get(context.Background(), key, lease); err != nil || lease.Spec.HolderIdentity == nil {
				return ""
			}
			return *lease.Spec.HolderIdentity
		}).ShouldNot(BeEmpty())
		Expect(*lease.Spec.LeaseDurationSeconds).To(BeEquivalentTo(137))

		cancel()
		Eventually(done).Should(Receive(BeNil()))
		stopped = true
		Expect(env.Client.Get(context.Background(), key, lease)).To(Succeed())
		Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), PointTo(BeEmpty())), "released on shutdown")
	})
})

func freeAddress() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}
