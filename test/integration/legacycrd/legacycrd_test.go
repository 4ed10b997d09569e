// Package legacycrd runs the operator against a MachineConfiguration CRD without the CEL rule
// that forbids Partial for controlplanemachinesets, as on a cluster whose CRD predates it.
package legacycrd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

const cpmsRule = "Only All or None selection mode is permitted for ControlPlaneMachineSets"

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestLegacyCRD(t *testing.T) {
	testenv.RunSpecs(t, "operator on a MachineConfiguration CRD that predates the CPMS rule", testenv.Waits{Timeout: 30 * time.Second})
}

var _ = BeforeSuite(func() {
	env = testenv.StartForSpecsChangingCRDs("the shipped CRD has the rule this suite removes", func(crd *apiextensionsv1.CustomResourceDefinition) int {
		removed := 0
		for i := range crd.Spec.Versions {
			removed += dropRule(crd.Spec.Versions[i].Schema.OpenAPIV3Schema, cpmsRule)
		}
		return removed
	})
})

// dropRule removes every CEL rule whose message contains msg from the schema and returns how many.
func dropRule(s *apiextensionsv1.JSONSchemaProps, msg string) int {
	if s == nil {
		return 0
	}
	n := 0
	kept := s.XValidations[:0]
	for _, v := range s.XValidations {
		if strings.Contains(v.Message, msg) {
			n++
			continue
		}
		kept = append(kept, v)
	}
	s.XValidations = kept
	for k, p := range s.Properties {
		n += dropRule(&p, msg)
		s.Properties[k] = p
	}
	if s.Items != nil {
		n += dropRule(s.Items.Schema, msg)
	}
	return n
}

var _ = Describe("A stored Partial selection for controlplanemachinesets", func() {
	It("is treated as None and reported with what to change", func() {
		Expect(fixtures.Create(ctx, env.Client,
			fixtures.Infrastructure(configv1.AWSPlatformType),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.ManagedBootImagesCPMS}, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		)).To(Succeed())
		partial := fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, operatorv1.Partial, &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}})
		Expect(fixtures.Create(ctx, env.Client, fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{partial}}))).
			To(Succeed(), "without the rule the API server stores Partial")

		mgr, err := env.StartOperator(controllers.Options{ReleaseVersion: fixtures.ReleaseVersion})
		Expect(err).NotTo(HaveOccurred())
		defer mgr.Stop()

		mc := &operatorv1.MachineConfiguration{}
		get := func() *operatorv1.MachineConfiguration {
			Expect(env.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
			return mc
		}
		Eventually(func() []operatorv1.MachineManager { return get().Status.ManagedBootImagesStatus.MachineManagers }).Should(Equal([]operatorv1.MachineManager{
			fixtures.MachineManager(operatorv1.MachineSets, operatorv1.All, nil),
			fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, operatorv1.None, nil),
		}))
		cond := meta.FindStatusCondition(get().Status.Conditions, status.ConditionConfigurationDegraded)
		Expect(cond).NotTo(BeNil())
		Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		Expect(cond.Reason).To(Equal(status.ReasonInvalidSelection))
		Expect(cond.Message).To(ContainSubstring("selection mode Partial is not permitted for controlplanemachinesets"))
		Expect(cond.Message).To(ContainSubstring("set selection.mode to All or None"))

		By("clearing the condition once the user picks All")
		patch := []byte(`{"spec":{"managedBootImages":{"machineManagers":[{"resource":"controlplanemachinesets","apiGroup":"machine.openshift.io","selection":{"mode":"All"}}]}}}`)
		Expect(env.Client.Patch(ctx, get(), client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		Eventually(func() metav1.ConditionStatus {
			return meta.FindStatusCondition(get().Status.Conditions, status.ConditionConfigurationDegraded).Status
		}).Should(Equal(metav1.ConditionFalse))
	})
})
