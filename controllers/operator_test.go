package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

func TestOperator(t *testing.T) {
	testenv.RunSpecs(t, "operator embedded in another manager", testenv.Waits{Timeout: 60 * time.Second, Polling: 100 * time.Millisecond})
}

// serviceAccount is the identity the shipped RBAC (manifests.RBACFile) grants.
const serviceAccount = "system:serviceaccount:openshift-machine-config-operator:bootimage-operator"

var (
	env        *testenv.Env
	ctx        = context.Background()
	asOperator *rest.Config
)

var _ = BeforeSuite(func() {
	env = testenv.StartForSpecs(testenv.Options{})
	rbac, err := fixtures.ManifestObjects(manifests.RBACFile)
	Expect(err).NotTo(HaveOccurred())
	Expect(fixtures.Create(ctx, env.Client, rbac...)).To(Succeed())
	asOperator = rest.CopyConfig(env.Config)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount}
})

// libraryGoGate mirrors library-go's featuregates.FeatureGate, which panics on an unknown gate.
type libraryGoGate interface {
	Enabled(configv1.FeatureGateName) bool
	KnownFeatures() []configv1.FeatureGateName
}

type hardcodedGate struct{ enabled, disabled []configv1.FeatureGateName }

func (g hardcodedGate) Enabled(name configv1.FeatureGateName) bool {
	for _, n := range g.enabled {
		if n == name {
			return true
		}
	}
	for _, n := range g.disabled {
		if n == name {
			return false
		}
	}
	panic(fmt.Sprintf("feature %q is not registered", name))
}

func (g hardcodedGate) KnownFeatures() []configv1.FeatureGateName {
	return append(append([]configv1.FeatureGateName{}, g.enabled...), g.disabled...)
}

// accessor mirrors library-go's FeatureGateAccess.CurrentFeatureGates.
type accessor struct{ gate libraryGoGate }

func (a accessor) CurrentFeatureGates() (libraryGoGate, error) {
	if a.gate == nil {
		return nil, errors.New("featureGates not yet observed")
	}
	return a.gate, nil
}

// lines is a logger that keeps what it is given, to prove where the controllers log.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.all = append(l.all, args)
		GinkgoWriter.Println(prefix, args)
	}, funcr.Options{})
}

func (l *lines) contain(s string) func() bool {
	return func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, line := range l.all {
			if strings.Contains(line, s) {
				return true
			}
		}
		return false
	}
}

// ownScheme is the scheme of another binary: its own types plus the operator's.
func ownScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(controllers.AddToScheme(s))
	return s
}

// bareOptions are another binary's manager options: no metrics server, probes or election.
func bareOptions(opts ctrl.Options) ctrl.Options {
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	opts.LeaderElection = false
	return opts
}

// Ordered for its BeforeAll: the cluster objects are created once in the suite's shared API server
// (its one spec could take them per spec, but another container's specs must not meet them early).
var _ = Describe("A manager of another binary", Ordered, func() {
	BeforeAll(func() {
		Expect(fixtures.Create(ctx, env.Client,
			fixtures.Infrastructure(configv1.GCPPlatformType),
			fixtures.FeatureGate(configv1.Default, fixtures.ReleaseVersion, nil, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV2),
		)).To(Succeed())
	})

	It("embeds the operator under the shipped RBAC, without leader election, and updates a MachineSet", func() {
		opts := controllers.ManagerOptions()
		opts.Scheme = ownScheme()
		mgr, err := ctrl.NewManager(asOperator, bareOptions(opts))
		Expect(err).NotTo(HaveOccurred())
		registry := prometheus.NewPedanticRegistry()
		logs := &lines{}
		// Gates as the MCO holds them: library-go's accessor, which knows neither per-platform
		// gate (removed once GA), so their compiled-in defaults apply.
		gates := controllers.FeatureGateAccess(accessor{hardcodedGate{disabled: []configv1.FeatureGateName{featuregates.ManagedBootImagesCPMS}}}, fixtures.ReleaseVersion)
		Expect(controllers.AddToManager(mgr, controllers.Options{
			Logger:       logs.logger(),
			Metrics:      registry,
			FeatureGates: gates,
			Name:         "embedded",
		})).To(Succeed())

		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(runCtx) }()
		DeferCleanup(func() {
			cancel()
			Expect(<-done).To(Succeed())
		})

		Expect(fixtures.Create(ctx, env.Client, fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		ms := &machinev1beta1.MachineSet{}
		Eventually(func() string {
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "worker-a"}, ms)).To(Succeed())
			return string(ms.Spec.Template.Spec.ProviderSpec.Value.Raw)
		}).Should(ContainSubstring(fixtures.NewGCPImage))
		Expect(ms.Spec.Template.Spec.ProviderSpec.Value.Raw).NotTo(ContainSubstring(fixtures.OldGCPImage))

		By("logging to the logger given, under the controller name given")
		Eventually(logs.contain(`"msg"="Updated boot image"`)).Should(BeTrue())
		Expect(logs.contain(`"controller"="embedded-machineset"`)()).To(BeTrue())

		By("counting on the registry given")
		Eventually(func() (float64, error) {
			families, err := registry.Gather()
			if err != nil {
				return 0, err
			}
			for _, f := range families {
				if f.GetName() == "bootimage_updates_total" {
					for _, m := range f.GetMetric() {
						if m.GetLabel()[0].GetValue() == "MachineSet" {
							return m.GetCounter().GetValue(), nil
						}
					}
				}
			}
			return 0, nil
		}).Should(BeNumerically(">=", 1))
		Expect(testutil.GatherAndCount(registry, "bootimage_cloud_requests_total")).To(BeZero(), "no GCP lookups linked, none made")

		By("letting a second registration share the process")
		opts = controllers.ManagerOptions()
		second, err := ctrl.NewManager(asOperator, bareOptions(opts))
		Expect(err).NotTo(HaveOccurred())
		Expect(controllers.AddToManager(second, controllers.Options{Name: "second", Metrics: prometheus.NewPedanticRegistry()})).To(Succeed())
		Expect(controllers.AddToManager(second, controllers.Options{Name: "third", Metrics: registry})).To(MatchError(ContainSubstring("registering the boot image metrics")))
	})
})

const mcoNamespace = "openshift-machine-config-operator"

var _ = Describe("NewScheme", func() {
	It("holds every type AddToManager checks for, and is a new scheme each time", func() {
		mgr, err := ctrl.NewManager(asOperator, bareOptions(ctrl.Options{
			Scheme: controllers.NewScheme(), Cache: controllers.CacheOptions(mcoNamespace), NewCache: controllers.NewCache(nil),
		}))
		Expect(err).NotTo(HaveOccurred())
		Expect(controllers.Check(mgr, mcoNamespace)).To(Succeed())
		Expect(controllers.NewScheme()).NotTo(BeIdenticalTo(controllers.NewScheme()))
	})
})

var _ = Describe("AddToManager on a manager that cannot serve it", func() {
	DescribeTable("says what is missing and registers nothing",
		func(opts func() ctrl.Options, messages ...string) {
			mgr, err := ctrl.NewManager(asOperator, bareOptions(opts()))
			Expect(err).NotTo(HaveOccurred())
			registry := prometheus.NewPedanticRegistry()
			err = controllers.AddToManager(mgr, controllers.Options{Metrics: registry})
			Expect(err).To(HaveOccurred())
			for _, m := range messages {
				Expect(err.Error()).To(ContainSubstring(m))
			}
			Expect(testutil.GatherAndCount(registry)).To(BeZero())
		},
		Entry("a default cache, which the shipped RBAC never lets sync", func() ctrl.Options {
			return ctrl.Options{Scheme: ownScheme()}
		}, "the cache was not built with controllers.NewCache", "controllers.ManagerOptions()"),
		Entry("a cluster-wide cache", func() ctrl.Options {
			opts := controllers.ManagerOptions()
			opts.Cache = cache.Options{}
			return opts
		}, "the cache lists MachineSets in all namespaces, which the shipped RBAC forbids (it never syncs): restrict them to openshift-machine-api",
			"the cache lists Secrets in all namespaces", "the cache lists ConfigMaps in all namespaces, which the shipped RBAC forbids (it never syncs): restrict them to openshift-machine-config-operator"),
		Entry("a cache of the wrong namespace", func() ctrl.Options {
			opts := controllers.ManagerOptions()
			opts.Cache = controllers.CacheOptions("elsewhere")
			return opts
		}, "the cache lists ConfigMaps in elsewhere: the operator needs exactly openshift-machine-config-operator"),
		Entry("a scheme without the OpenShift types", func() ctrl.Options {
			opts := controllers.ManagerOptions()
			s := runtime.NewScheme()
			utilruntime.Must(clientgoscheme.AddToScheme(s))
			opts.Scheme = s
			opts.Cache = cache.Options{} // restrictions by type need the types
			return opts
		}, "the scheme has no *v1beta1.MachineSet (controllers.AddToScheme adds it)", "the scheme has no *v1.FeatureGate"),
	)
})
