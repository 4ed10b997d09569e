package kube_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

func TestKube(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kube")
}

var _ = Describe("GateSource", func() {
	ctx := context.Background()
	reader := func(objs ...client.Object) client.Reader {
		return fake.NewClientBuilder().WithScheme(kube.NewScheme()).WithObjects(objs...).Build()
	}
	featureGate := fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, "4.20.3", []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil)

	It("takes the release version from ClusterVersion when not given", func() {
		src := kube.GateSource{Reader: reader(featureGate, fixtures.ClusterVersion("4.20.3", true))}
		gates, err := src.Current(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(gates.Version).To(Equal("4.20.3"))
		Expect(gates.Enabled(fg.ManagedBootImagesCPMS)).To(BeTrue())
	})

	It("prefers the configured release version", func() {
		src := kube.GateSource{Reader: reader(featureGate, fixtures.ClusterVersion("4.21.0", false)), ReleaseVersion: "4.20.3"}
		gates, err := src.Current(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(gates.Version).To(Equal("4.20.3"))
	})

	It("says the FeatureGate is missing", func() {
		_, err := kube.GateSource{Reader: reader(), ReleaseVersion: "4.20.3"}.Current(ctx)
		Expect(err).To(MatchError("FeatureGate/cluster not found: feature gates unknown"))
	})

	It("says the release version is unknown", func() {
		_, err := kube.GateSource{Reader: reader(featureGate)}.Current(ctx)
		Expect(err).To(MatchError(ContainSubstring("release version unknown")))
	})
})
