package controllers_test

import (
	"context"
	"errors"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/migrations"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

const (
	ms   = operatorv1.MachineSets
	cpms = operatorv1.ControlPlaneMachineSets
)

var infraSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"role": "infra"}}

func entry(resource operatorv1.MachineManagerMachineSetsResourceType, mode operatorv1.MachineManagerSelectorMode) operatorv1.MachineManager {
	return fixtures.MachineManager(resource, mode, infraSelector)
}

// cluster sets up Infrastructure, FeatureGate and ClusterVersion for a spec, and removes them and
// MachineConfiguration/cluster after it.
func cluster(platform configv1.PlatformType, cpmsGate bool) {
	GinkgoHelper()
	enabled, disabled := []configv1.FeatureGateName{fg.BootImageSkewEnforcement}, []configv1.FeatureGateName{}
	if cpmsGate {
		enabled = append(enabled, fg.ManagedBootImagesCPMS)
	} else {
		disabled = append(disabled, fg.ManagedBootImagesCPMS)
	}
	Expect(fixtures.Create(ctx, k8s,
		fixtures.Infrastructure(platform),
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, enabled, disabled),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
	)).To(Succeed())
	DeferCleanup(cleanCluster)
}

func cleanCluster() {
	for _, obj := range []client.Object{&operatorv1.MachineConfiguration{}, &configv1.Infrastructure{}, &configv1.FeatureGate{}, &configv1.ClusterVersion{}} {
		Expect(k8s.DeleteAllOf(ctx, obj)).To(Succeed())
	}
	Expect(k8s.DeleteAllOf(ctx, &machinev1beta1.MachineSet{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
	// Events too: the operator reads when a decision was first said from them (kube.FirstSaid).
	for _, ns := range []string{"default", fixtures.MachineAPINamespace} {
		Expect(k8s.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace(ns))).To(Succeed())
	}
}

func startOperator(opts controllers.Options) *testenv.Manager {
	GinkgoHelper()
	return startOperatorWithHooks(opts, seams.Hooks{})
}

// startOperatorWithHooks starts the operator with test seams.
func startOperatorWithHooks(opts controllers.Options, hooks seams.Hooks) *testenv.Manager {
	GinkgoHelper()
	opts.ReleaseVersion = fixtures.ReleaseVersion
	mgr, err := env.StartOperatorWithHooks(hooks, opts)
	Expect(err).NotTo(HaveOccurred())
	return mgr
}

func machineConfiguration() *operatorv1.MachineConfiguration {
	GinkgoHelper()
	mc := &operatorv1.MachineConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
	return mc
}

func effective() []operatorv1.MachineManager {
	return machineConfiguration().Status.ManagedBootImagesStatus.MachineManagers
}

// Ordered for its BeforeAll: one operator serves every entry and spec, as it would a cluster
// whose MachineConfiguration comes and goes; each spec makes and removes its own cluster objects.
var _ = Describe("Effective boot image configuration", Ordered, func() {
	var mgr *testenv.Manager
	BeforeAll(func() {
		mgr = startOperator(controllers.Options{})
		DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })
	})

	DescribeTable("status.managedBootImagesStatus for spec x platform x gate",
		func(platform configv1.PlatformType, cpmsGate bool, spec *operatorv1.ManagedBootImages, want []operatorv1.MachineManager) {
			cluster(platform, cpmsGate)
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(spec))).To(Succeed())
			Eventually(func() int64 { return machineConfiguration().Status.ObservedGeneration }).ShouldNot(BeZero())
			Eventually(effective).Should(Equal(want))
			Eventually(func() int64 { return machineConfiguration().Status.ObservedGeneration }).Should(Equal(machineConfiguration().Generation))
		},
		Entry("AWS, no opinion, gate on", configv1.AWSPlatformType, true, nil, []operatorv1.MachineManager{entry(ms, operatorv1.All), entry(cpms, operatorv1.None)}),
		Entry("AWS, no opinion, gate off", configv1.AWSPlatformType, false, nil, []operatorv1.MachineManager{entry(ms, operatorv1.All)}),
		Entry("GCP, CPMS opted in: MachineSets keep their default", configv1.GCPPlatformType, true,
			&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{entry(cpms, operatorv1.All)}},
			[]operatorv1.MachineManager{entry(ms, operatorv1.All), entry(cpms, operatorv1.All)}),
		Entry("Azure, MachineSets Partial: the CPMS keeps its default", configv1.AzurePlatformType, true,
			&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{entry(ms, operatorv1.Partial)}},
			[]operatorv1.MachineManager{entry(ms, operatorv1.Partial), entry(cpms, operatorv1.None)}),
		Entry("vSphere: no CPMS entry even with the gate on", configv1.VSpherePlatformType, true, nil, []operatorv1.MachineManager{entry(ms, operatorv1.All)}),
		Entry("AWS, CPMS entry with the gate off is not in force", configv1.AWSPlatformType, false,
			&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{entry(ms, operatorv1.None), entry(cpms, operatorv1.All)}},
			[]operatorv1.MachineManager{entry(ms, operatorv1.None)}),
		Entry("BareMetal: nothing managed", configv1.BareMetalPlatformType, true, nil, []operatorv1.MachineManager(nil)),
	)

	It("adds and removes the CPMS entry as the gate flips, without a restart", func() {
		cluster(configv1.AWSPlatformType, false)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(nil))).To(Succeed())
		Eventually(effective).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.All)}))

		gate := &configv1.FeatureGate{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, gate)).To(Succeed())
		on := fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil)
		Expect(fixtures.SetStatus(ctx, k8s, gate, on)).To(Succeed())
		Eventually(effective).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.All), entry(cpms, operatorv1.None)}))

		off := fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, nil, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS})
		Expect(fixtures.SetStatus(ctx, k8s, gate, off)).To(Succeed())
		Eventually(effective).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.All)}))
	})

	It("writes status only when it changes", func() {
		cluster(configv1.AWSPlatformType, true)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(nil))).To(Succeed())
		Eventually(effective).Should(HaveLen(2))
		// Both writers of the status are done: the configuration and the boot image conditions.
		Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(HaveField("Status", metav1.ConditionFalse))
		Eventually(condition(status.ConditionConfigurationDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		// An Infrastructure status change passes the reconciler's predicates and changes nothing it
		// computes: the reconciler runs, and must not write.
		expectNoWrites(recordWrites(&operatorv1.MachineConfigurationList{}), machineConfiguration(), "machineconfiguration", 1)
	})
})

// optOutWatch records every MachineConfiguration and MachineSet change the API server reports,
// so a spec can assert that no status ever opted in, and that no MachineSet was written.
type optOutWatch struct {
	mu          sync.Mutex
	statuses    [][]operatorv1.MachineManager
	machineSets []watch.EventType
	stop        func()
}

func watchOptOut() *optOutWatch {
	GinkgoHelper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	mcs, err := wc.Watch(ctx, &operatorv1.MachineConfigurationList{})
	Expect(err).NotTo(HaveOccurred())
	sets, err := wc.Watch(ctx, &machinev1beta1.MachineSetList{}, client.InNamespace(fixtures.MachineAPINamespace))
	Expect(err).NotTo(HaveOccurred())
	w := &optOutWatch{stop: func() { mcs.Stop(); sets.Stop() }}
	go func() {
		for ev := range mcs.ResultChan() {
			if mc, ok := ev.Object.(*operatorv1.MachineConfiguration); ok {
				w.mu.Lock()
				w.statuses = append(w.statuses, mc.Status.ManagedBootImagesStatus.MachineManagers)
				w.mu.Unlock()
			}
		}
	}()
	go func() {
		for ev := range sets.ResultChan() {
			w.mu.Lock()
			w.machineSets = append(w.machineSets, ev.Type)
			w.mu.Unlock()
		}
	}()
	DeferCleanup(w.stop)
	return w
}

// expectNeverOptedIn asserts that no status seen selected anything, and no MachineSet was modified.
func (w *optOutWatch) expectNeverOptedIn() {
	GinkgoHelper()
	w.mu.Lock()
	defer w.mu.Unlock()
	Expect(w.statuses).NotTo(BeEmpty())
	for _, status := range w.statuses {
		for _, m := range status {
			Expect(m.Selection.Mode).To(Equal(operatorv1.None), "a status opted in %s", m.Resource)
		}
	}
	Expect(w.machineSets).NotTo(ContainElement(watch.Modified))
}

var _ = Describe("Legacy empty machineManagers migration", func() {
	emptyList := &operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{}}

	specEntries := func() []operatorv1.MachineManager {
		return machineConfiguration().Spec.ManagedBootImages.MachineManagers
	}

	// setUp starts the watch, then creates a MachineSet and the MachineConfiguration with spec.
	setUp := func(platform configv1.PlatformType, cpmsGate bool, spec *operatorv1.ManagedBootImages) *optOutWatch {
		cluster(platform, cpmsGate)
		w := watchOptOut()
		Expect(fixtures.Create(ctx, k8s,
			fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
			fixtures.MachineConfiguration(spec))).To(Succeed())
		return w
	}

	It("writes explicit None for MachineSets and the CPMS when the gate is on", func() {
		w := setUp(configv1.AWSPlatformType, true, emptyList)
		mgr := startOperator(controllers.Options{})
		defer mgr.Stop()

		Eventually(specEntries).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.None), entry(cpms, operatorv1.None)}))
		Eventually(effective).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.None), entry(cpms, operatorv1.None)}))
		Expect(machineConfiguration().Annotations).To(HaveKey(migrations.AnnotationPrefix + "empty-machine-managers"))
		Eventually(eventNotes(migrations.ReasonMigrated)).Should(ConsistOf(ContainSubstring("explicit selection mode None for [machinesets controlplanemachinesets]")))
		w.expectNeverOptedIn()
	})

	It("writes explicit None for MachineSets only when the gate is off", func() {
		w := setUp(configv1.GCPPlatformType, false, emptyList)
		mgr := startOperator(controllers.Options{})
		defer mgr.Stop()

		Eventually(specEntries).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.None)}))
		Eventually(effective).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.None)}))
		w.expectNeverOptedIn()
	})

	It("lets a user's concurrent edit win", func() {
		setUp(configv1.AWSPlatformType, true, emptyList)
		userChoice := []operatorv1.MachineManager{entry(ms, operatorv1.Partial)}
		raced := false
		mgr := startOperatorWithHooks(controllers.Options{}, seams.Hooks{BeforeMigrationWrite: func(context.Context, string) error {
			if !raced {
				raced = true
				mc := machineConfiguration()
				mc.Spec.ManagedBootImages.MachineManagers = userChoice
				patch := []byte(`{"spec":{"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"Partial","partial":{"machineResourceSelector":{"matchLabels":{"role":"infra"}}}}}]}}}`)
				Expect(k8s.Patch(ctx, mc, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
			}
			return nil
		}})
		defer mgr.Stop()

		Eventually(effective).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.Partial), entry(cpms, operatorv1.None)}))
		Expect(raced).To(BeTrue())
		Expect(specEntries()).To(Equal(userChoice))
		Expect(machineConfiguration().Annotations).NotTo(HaveKey(migrations.AnnotationPrefix + "empty-machine-managers"))
	})

	It("never opts in when the operator stops in the middle and starts again", func() {
		w := setUp(configv1.AWSPlatformType, true, emptyList)
		crashed := make(chan struct{})
		var once sync.Once
		first := startOperatorWithHooks(controllers.Options{}, seams.Hooks{BeforeMigrationWrite: func(context.Context, string) error {
			once.Do(func() { close(crashed) })
			return errors.New("operator killed before the migration's write")
		}})
		Eventually(crashed).Should(BeClosed())
		Expect(first.Stop()).To(Succeed())
		Expect(specEntries()).To(BeEmpty())
		Expect(specEntries()).NotTo(BeNil(), "the empty list is still there")

		second := startOperator(controllers.Options{})
		defer second.Stop()
		Eventually(specEntries).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.None), entry(cpms, operatorv1.None)}))
		Eventually(effective).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.None), entry(cpms, operatorv1.None)}))
		w.expectNeverOptedIn()
	})

	It("leaves an absent list alone", func() {
		setUp(configv1.AWSPlatformType, true, nil)
		mgr := startOperator(controllers.Options{})
		defer mgr.Stop()

		Eventually(effective).Should(Equal([]operatorv1.MachineManager{entry(ms, operatorv1.All), entry(cpms, operatorv1.None)}))
		mc := machineConfiguration()
		Expect(mc.Spec.ManagedBootImages.MachineManagers).To(BeNil())
		Expect(mc.Annotations).NotTo(HaveKey(migrations.AnnotationPrefix + "empty-machine-managers"))
		Expect(eventNotes(migrations.ReasonMigrated)()).To(BeEmpty())
	})
})
