package capi_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// A cluster with Cluster API and no Machine API (the MachineAPI capability off), whose Cluster
// API CRDs are installed after the operator started: its Cluster API controllers start when they
// appear, and Cluster API MachineSets, with no twin to ask, are updated.
// Ordered for its BeforeAll: its own API server, without the Machine API CRDs, and an operator
// started on it before the spec installs the Cluster API CRDs, which is the moment under test.
var _ = Describe("Cluster API CRDs installed after the operator started, without the Machine API", Ordered, func() {
	var own *testenv.Env
	BeforeAll(func() {
		own = testenv.StartForSpecs(testenv.Options{CAPI: true, SkipCRD: func(crd *apiextensionsv1.CustomResourceDefinition) bool {
			return strings.HasSuffix(crd.Spec.Group, "x-k8s.io") || crd.Spec.Group == "machine.openshift.io"
		}})
		c := own.Client
		Expect(fixtures.Create(ctx, c, append(fixtures.ClusterAPIOnAWS(fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All)),
			fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion))...)).To(Succeed())
		mgr, err := own.StartOperatorWithHooks(seams.Hooks{CRDPollInterval: 100 * time.Millisecond},
			controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mgr.Stop)
	})

	It("starts the Cluster API controllers once the CRDs are served, and updates a MachineSet without a twin", func() {
		crds, err := testenv.LoadCAPICRDs()
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(own.Config, envtest.CRDInstallOptions{CRDs: crds})
		Expect(err).NotTo(HaveOccurred())
		Expect(own.Client.Create(ctx, fixtures.AWSMachineTemplate(oldTemplate, fixtures.OldAWSAMI))).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", "w-1a", oldTemplate)
		Expect(own.Client.Create(ctx, owner)).To(Succeed())
		Eventually(func() string {
			got := owner.DeepCopy()
			Expect(own.Client.Get(ctx, client.ObjectKeyFromObject(owner), got)).To(Succeed())
			return fmt.Sprint(field(got.Object, "spec", "template", "spec", "infrastructureRef", "name"))
		}).Should(And(HavePrefix("w-1a-"), Not(Equal(oldTemplate))), "pointed at a copy")
		Expect(bootimage.ClusterAPINamespace).To(Equal(testenv.CAPINamespace))
	})
})
