// Package nomachineapi_test runs the operator on an API server without the Machine API CRDs (the
// MachineAPI capability off), then installs them.
package nomachineapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	fg "github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

func TestNoMachineAPI(t *testing.T) {
	testenv.RunSpecs(t, "operator on a cluster without the Machine API", testenv.Waits{Timeout: 60 * time.Second, Polling: 100 * time.Millisecond})
}

func machineAPI(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd.Spec.Group == machinev1beta1.GroupName
}

var _ = Describe("A cluster without the Machine API CRDs", func() {
	It("starts, stays up, says why MachineSets wait, and manages them once the CRDs are installed", func() {
		ctx := context.Background()
		testenv.LogToGinkgo(1)
		env := testenv.StartForSpecs(testenv.Options{SkipCRD: machineAPI})
		k8s := env.Client
		Expect(fixtures.Create(ctx, k8s,
			fixtures.Infrastructure(configv1.AWSPlatformType),
			fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{fg.BootImageSkewEnforcement, fg.ManagedBootImagesCPMS}, nil),
			fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		)).To(Succeed())

		mgr, err := env.StartOperatorWithHooks(seams.Hooks{CRDPollInterval: 200 * time.Millisecond},
			controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })

		supported := func() metav1.Condition {
			mc := &operatorv1.MachineConfiguration{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
			if c := meta.FindStatusCondition(mc.Status.Conditions, status.ConditionBootImageUpdateSupported); c != nil {
				return *c
			}
			return metav1.Condition{}
		}
		Eventually(supported).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", status.ReasonMachineAPIMissing),
			HaveField("Message", ContainSubstring("The API serves no MachineSet (machinesets.machine.openshift.io), ControlPlaneMachineSet (controlplanemachinesets.machine.openshift.io)"))))
		// The rest works meanwhile: the effective configuration is computed.
		mc := &operatorv1.MachineConfiguration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
		Expect(mc.Status.ManagedBootImagesStatus.MachineManagers).To(HaveLen(2))
		Expect(mgr.Exited()).To(BeFalse(), "the manager must not exit without the Machine API")

		crds, err := testenv.LoadCRDs("")
		Expect(err).NotTo(HaveOccurred())
		var machine []*apiextensionsv1.CustomResourceDefinition
		for _, crd := range crds {
			if machineAPI(crd) {
				machine = append(machine, crd)
			}
		}
		Expect(machine).To(HaveLen(3), "MachineSets, Machines and the ControlPlaneMachineSet")
		_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: machine})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			return fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))
		}).Should(Succeed())

		ami := func() any {
			ms := &machinev1beta1.MachineSet{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "worker-a"}, ms)).To(Succeed())
			var ps map[string]any
			Expect(json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
			return ps["ami"].(map[string]any)["id"]
		}
		Eventually(ami).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Eventually(supported).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(mgr.Exited()).To(BeFalse())
	})
})
