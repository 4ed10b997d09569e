package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/textlogger"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

func TestOperator(t *testing.T) {
	testenv.RunSpecs(t, "bootimage-operator process", testenv.Waits{Timeout: 60 * time.Second})
}

var _ = Describe("Startup failures", func() {
	DescribeTable("return a one-line reason",
		func(args []string, message string) {
			err := runArgs(context.Background(), args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("a missing kubeconfig", []string{"--kubeconfig", "/nonexistent/kubeconfig"}, "loading kubeconfig /nonexistent/kubeconfig"),
		Entry("an unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"),
		Entry("stray arguments", []string{"extra"}, `unexpected arguments ["extra"]`),
		Entry("a metrics cert dir without the certificate", []string{"--metrics-cert-dir", "/nonexistent"}, "--metrics-cert-dir: stat /nonexistent/tls.crt: no such file or directory"),
	)
})

// runArgs runs the operator as main does, logging to the spec's output; unlike main it sets no
// process-wide logger, so specs may call it more than once.
func runArgs(ctx context.Context, args []string) error {
	opts, err := parseFlags(args)
	if err != nil {
		return err
	}
	return run(ctx, opts, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(GinkgoWriter))))
}

func freeAddress() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

// One process can run the manager once (controller names are global), so one spec covers the
// process end to end.
// Ordered for its BeforeAll: an API server of its own, which the operator process's Lease,
// RBAC and ServiceAccount must not share with another container's specs.
var _ = Describe("The operator process on a real API server, with only the shipped RBAC", Ordered, func() {
	var env *testenv.Env
	BeforeAll(func() { env = testenv.StartForSpecs(testenv.Options{}) })

	It("serves probes and metrics, holds the Lease, updates a MachineSet as its ServiceAccount, and releases the Lease on shutdown", func() {
		ctx := context.Background()
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-monitoring"}})).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-monitoring", Name: "prometheus-k8s"}})).To(Succeed())
		for _, obj := range manifestObjects(manifests.RBACFile) {
			Expect(env.Client.Create(ctx, obj)).To(Succeed())
		}
		wrongArch := fixtures.MachineSet("worker-b", fixtures.GCPProviderSpec(fixtures.OldGCPImage))
		wrongArch.Annotations[bootimage.ArchAnnotation] = "kubernetes.io/arch=sparc64"
		Expect(fixtures.Create(ctx, env.Client,
			fixtures.Infrastructure(configv1.GCPPlatformType),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{featuregates.BootImageSkewEnforcement}, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV2),
			fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)),
			wrongArch,
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

		probe, metricsAddr := freeAddress(), freeAddress()
		certDir := GinkgoT().TempDir()
		servingCA, err := testenv.ServingCert(certDir)
		Expect(err).NotTo(HaveOccurred())
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- runArgs(runCtx, []string{"--kubeconfig", asOperator, "--release-version", fixtures.ReleaseVersion,
				"--metrics-bind-address", metricsAddr, "--metrics-cert-dir", certDir, "--health-probe-bind-address", probe})
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
		// Ready says what it checks: the caches synced, and leading on a fresh lease or standing by.
		Eventually(func() (string, error) {
			resp, err := http.Get(fmt.Sprintf("http://%s/readyz?verbose", probe))
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return fmt.Sprintf("%d %s", resp.StatusCode, body), err
		}).Should(And(HavePrefix("200 "), ContainSubstring("[+]caches-synced ok"), ContainSubstring("[+]leader-or-standby ok")))

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

		By("refusing metrics to a caller without a token or without the right to get /metrics")
		scrape := func(token string) testenv.Scraped {
			GinkgoHelper()
			got, err := testenv.Scrape(metricsAddr, servingCA, token)
			Expect(err).NotTo(HaveOccurred())
			Expect(got.ProtoMajor).To(Equal(1), "HTTP/2 is off")
			return got
		}
		Expect(scrape("").Status).To(Equal(http.StatusUnauthorized))
		operatorToken, err := env.ServiceAccountToken(ctx, "openshift-machine-config-operator", "bootimage-operator")
		Expect(err).NotTo(HaveOccurred())
		Expect(scrape(operatorToken).Status).To(Equal(http.StatusForbidden))

		By("serving Prometheus, with its ServiceAccount token, every metric the alerts read")
		prometheusToken, err := env.ServiceAccountToken(ctx, "openshift-monitoring", "prometheus-k8s")
		Expect(err).NotTo(HaveOccurred())
		var families map[string]*dto.MetricFamily
		Eventually(func(g Gomega) {
			got, err := testenv.Scrape(metricsAddr, servingCA, prometheusToken)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Status).To(Equal(http.StatusOK))
			families = got.Families
			value := got.Value
			g.Expect(value("bootimage_updates_total", "kind", "MachineSet")).To(BeNumerically(">=", 1))
			g.Expect(value("bootimage_decisions", "kind", "MachineSet", "action", "NoChange", "reason", "UpToDate", "stream", "rhel-9")).To(BeEquivalentTo(1))
			g.Expect(value("bootimage_decisions", "kind", "MachineSet", "action", "Error", "reason", "InvalidArchitecture", "stream", "rhel-9")).To(BeEquivalentTo(1))
			g.Expect(value("bootimage_errors_total", "kind", "MachineSet", "reason", "InvalidArchitecture")).To(BeNumerically(">=", 1))
			g.Expect(value("bootimage_degraded")).To(BeEquivalentTo(1))
			g.Expect(value("bootimage_last_successful_reconcile_timestamp_seconds")).To(BeNumerically(">", 0))
		}).Should(Succeed())
		// Defined by bootimage/cloud and exported once a cloud API is called, which this GCP
		// cluster without credentials never does.
		cloudMetrics := []string{"bootimage_cloud_requests_total", "bootimage_cloud_request_duration_seconds"}
		for _, name := range append(alertMetrics(), "bootimage_upgrade_blocked") {
			if !slices.Contains(cloudMetrics, name) {
				Expect(families).To(HaveKey(name), "the alerts read %s", name)
			}
		}

		cancel()
		Eventually(done).Should(Receive(BeNil()))
		stopped = true
		Expect(env.Client.Get(ctx, leaseKey, lease)).To(Succeed())
		Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), PointTo(BeEmpty())), "released on shutdown")
	})
})

// alertMetrics returns the operator's metric names that the shipped PrometheusRule's expressions
// read. Prometheus's own rule parser checks the rules in test/manifests, a module of its own so
// that the operator's module does not require Prometheus.
func alertMetrics() []string {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(manifests.RepoRoot(), "manifests", manifests.MetricsFile))
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var rule struct {
			Kind string `json:"kind"`
			Spec struct {
				Groups []struct {
					Rules []struct {
						Expr string `json:"expr"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"spec"`
		}
		Expect(yaml.Unmarshal([]byte(doc), &rule)).To(Succeed())
		if rule.Kind != "PrometheusRule" {
			continue
		}
		for _, g := range rule.Spec.Groups {
			for _, r := range g.Rules {
				names = append(names, operatorMetric.FindAllString(r.Expr, -1)...)
			}
		}
	}
	Expect(names).NotTo(BeEmpty(), "no alerts in the shipped metrics manifest")
	return names
}

// operatorMetric matches the operator's metric names inside a PromQL expression.
var operatorMetric = regexp.MustCompile(`\bbootimage_[a-z_]+\b`)

// manifestObjects decodes the shipped manifest file name.
func manifestObjects(name string) []client.Object {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(manifests.RepoRoot(), "manifests", name))
	Expect(err).NotTo(HaveOccurred())
	decoder := serializer.NewCodecFactory(clientgoscheme.Scheme).UniversalDeserializer()
	var objs []client.Object
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := decoder.Decode([]byte(doc), nil, nil)
		Expect(err).NotTo(HaveOccurred())
		objs = append(objs, obj.(client.Object))
	}
	return objs
}
