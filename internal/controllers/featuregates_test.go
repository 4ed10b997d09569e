package controllers_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedding "github.com/bootimage-operator/bootimage-operator/controllers"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// Ordered for its BeforeAll: one operator, started before any FeatureGate exists, sees the gates
// appear and flip without a restart; that one start is what the specs share.
var _ = Describe("Feature gates read live", Ordered, func() {
	var mgr *testenv.Manager

	BeforeAll(func() {
		var err error
		mgr, err = env.StartOperator(embedding.Options{ReleaseVersion: fixtures.ReleaseVersion})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			Expect(mgr.Stop()).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &configv1.FeatureGate{})).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace("default"))).To(Succeed())
		})
	})

	It("reports the gates as unknown while FeatureGate/cluster is missing", func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.ClusterVersion(fixtures.ReleaseVersion, true))).To(Succeed())
		DeferCleanup(func() { Expect(k8s.DeleteAllOf(ctx, &configv1.ClusterVersion{})).To(Succeed()) })
		Eventually(eventNotes(controllers.ReasonFeatureGatesUnknown)).Should(ContainElement(
			"Boot image controllers hold: FeatureGate/cluster not found: feature gates unknown"))
		_, err := kube.GateSource{Reader: mgr.GetClient(), ReleaseVersion: fixtures.ReleaseVersion}.Current(ctx)
		Expect(err).To(HaveOccurred())
	})

	It("sees a gate flipped on and off without a restart", func() {
		gate := fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, nil, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS})
		Expect(fixtures.Create(ctx, k8s, gate)).To(Succeed())
		Eventually(eventNotes(controllers.ReasonFeatureGatesRead)).Should(ContainElement(ContainSubstring("ManagedBootImagesCPMS=off")))

		flip := func(enabled, disabled []configv1.FeatureGateName) {
			want := fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, enabled, disabled)
			Expect(fixtures.SetStatus(ctx, k8s, gate, want)).To(Succeed())
		}
		cpmsEnabled := func() bool {
			gates, err := kube.GateSource{Reader: mgr.GetClient(), ReleaseVersion: fixtures.ReleaseVersion}.Current(ctx)
			Expect(err).NotTo(HaveOccurred())
			return gates.Enabled(fg.ManagedBootImagesCPMS)
		}

		flip([]configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil)
		Eventually(cpmsEnabled).Should(BeTrue())
		Eventually(eventNotes(controllers.ReasonFeatureGatesRead)).Should(ContainElement(ContainSubstring("ManagedBootImagesCPMS=on")))

		flip(nil, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS})
		Eventually(cpmsEnabled).Should(BeFalse())
		Eventually(eventNotes(controllers.ReasonFeatureGatesRead)).Should(HaveLen(3))
	})

	It("holds when the FeatureGate has no entry for the running version", func() {
		gate := &configv1.FeatureGate{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, gate)).To(Succeed())
		Expect(fixtures.SetStatus(ctx, k8s, gate, fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, "4.19.9", nil, nil))).To(Succeed())
		Eventually(eventNotes(controllers.ReasonFeatureGatesUnknown)).Should(ContainElement(
			`Boot image controllers hold: FeatureGate/cluster has no status.featureGates entry for release version "4.20.3"`))
	})
})

// lateGates is an embedder's gate reader that knows the gates only once ready is set, with no
// cluster event when it becomes so (library-go's accessor observing them).
type lateGates struct {
	ready atomic.Bool
	gates fg.Reader
}

func (l *lateGates) Current(ctx context.Context) (fg.Gates, error) {
	if !l.ready.Load() {
		return fg.Gates{}, errors.New("feature gates not observed yet")
	}
	return l.gates.Current(ctx)
}

var _ = Describe("A feature gate reader that becomes ready later", func() {
	It("has the boot images updated without any cluster change", func() {
		bootImageCluster(configv1.AWSPlatformType)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))).To(Succeed())
		late := &lateGates{}
		mgr := startOperator(embedding.Options{Images: staticImages, FeatureGates: late})
		DeferCleanup(mgr.Stop)
		late.gates = kube.GateSource{Reader: mgr.GetClient(), ReleaseVersion: fixtures.ReleaseVersion}
		Eventually(eventNotes(controllers.ReasonFeatureGatesUnknown)).Should(ContainElement(ContainSubstring("feature gates not observed yet")))
		Expect(amiOf("worker-a")()).To(Equal(fixtures.OldAWSAMI))

		late.ready.Store(true)
		Eventually(amiOf("worker-a"), 2*steps.GatesRetry+10*time.Second).Should(Equal(fixtures.NewAWSAMIUSEast1))
	})
})
