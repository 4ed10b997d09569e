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
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
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

func freeAddress() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

// One process can run the manager once (controller names are global), so one spec covers the
// process end to end.
var _ = Describe("The operator process on a real API server, with only the shipped RBAC", Ordered, func() {
	var env *testenv.Env
	BeforeAll(func() { env = testenv.StartForSpecs(testenv.Options{}) })

	It("serves probes, holds the Lease, updates a MachineSet as its ServiceAccount, and releases the Lease on shutdown", func() {
		ctx := context.Background()
		rbac, err := fixtures.ManifestObjects("01-rbac.yaml")
		Expect(err).NotTo(HaveOccurred())
		for _, obj := range rbac {
			Expect(env.Client.Create(ctx, obj)).To(Succeed())
		}
		Expect(fixtures.Create(ctx, env.Client,
			fixtures.Infrastructure(configv1.GCPPlatformType),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{featuregates.BootImageSkewEnforcement}, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV2),
			fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)),
		)).To(Succeed())

		// The kubeconfig of an admin who acts as the operator's ServiceAccount.
		admin := filepath.Join(GinkgoT().TempDir(), "admin")
		Expect(env.WriteKubeconfig(admin)).To(Succeed())
		kc, err := clientcmd.LoadFromFile(admin)
		Expect(err).NotTo(HaveOccurred())
		for _, user := range kc.AuthInfos {
			user.Impersonate = "system:serviceaccount:openshift-machine-config-operator:bootimage-operator"
		}
		asOperator := filepath.Join(GinkgoT().TempDir(), "operator")
		Expect(clientcmd.WriteToFile(*kc, asOperator)).To(Succeed())

		probe := freeAddress()
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- run(runCtx, []string{"--kubeconfig", asOperator, "--release-version", fixtures.ReleaseVersion,
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
		leaseKey := client.ObjectKey{Namespace: leaseNS, Name: leaseName}
		Eventually(func() string {
			if err := env.Client.Get(ctx, leaseKey, lease); err != nil || lease.Spec.HolderIdentity == nil {
				return ""
			}
			return *lease.Spec.HolderIdentity
		}).ShouldNot(BeEmpty())
		Expect(*lease.Spec.LeaseDurationSeconds).To(BeEquivalentTo(137))

		ms := &machinev1beta1.MachineSet{}
		Eventually(func() string {
			select {
			case err := <-done:
				Fail(fmt.Sprintf("the operator stopped: %v", err))
			default:
			}
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "worker-a"}, ms)).To(Succeed())
			return string(ms.Spec.Template.Spec.ProviderSpec.Value.Raw)
		}).Should(ContainSubstring(fixtures.NewGCPImage))
		secret := &corev1.Secret{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "worker-user-data"}, secret)).To(Succeed())
		Expect(secret.Annotations).To(HaveKeyWithValue("bootimage.openshift.io/user-data-upgraded-from", "2.2.0"))
		mc := &operatorv1.MachineConfiguration{}
		Eventually(func() []metav1.Condition {
			Expect(env.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
			return mc.Status.Conditions
		}).Should(ContainElement(And(HaveField("Type", "BootImageUpdateProgressing"), HaveField("Status", metav1.ConditionFalse))))
		events := &corev1.EventList{}
		Eventually(func() []corev1.Event {
			Expect(env.Client.List(ctx, events, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
			return events.Items
		}).Should(ContainElement(HaveField("Reason", "BootImageUpdated")))

		cancel()
		Eventually(done).Should(Receive(BeNil()))
		stopped = true
		Expect(env.Client.Get(ctx, leaseKey, lease)).To(Succeed())
		Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), PointTo(BeEmpty())), "released on shutdown")
	})
})
