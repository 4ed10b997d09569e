package capi_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// Issue 34: a 5.0 installer labels its Cluster API MachineSets with their OS stream; each takes
// its own stream's AMI, and one of a stream coreos-bootimages lacks is left alone.
var _ = Describe("Cluster API objects on a 5.0 cluster", func() {
	It("copies each template with its own stream's AMI, MachineDeployments too, and skips a stream the ConfigMap lacks", func() {
		own := testenv.StartForSpecs(testenv.Options{CAPI: true})
		c := own.Client
		Expect(fixtures.Create(ctx, c, append(fixtures.ClusterAPIOnAWS(
			fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All), fixtures.ClusterAPIManager(bootimage.MachineDeployments, operatorv1.All)),
			fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion),
			fixtures.OSImageStream("rhel-10"), fixtures.Pool("worker", ""))...)).To(Succeed())
		owners := map[string]*unstructured.Unstructured{}
		for _, o := range []struct{ kind, name, osStream string }{
			{"MachineSet", "rhel10", "rhel-10"}, {"MachineSet", "rhel9", "rhel-9"}, {"MachineSet", "centos", "centos-10"},
			{"MachineDeployment", "rhel10-md", "rhel-10"},
		} {
			Expect(c.Create(ctx, fixtures.AWSMachineTemplate(o.name+"-0", fixtures.OldAWSAMI))).To(Succeed())
			owner := fixtures.ClusterAPIOwner(o.kind, o.name, o.name+"-0")
			owner.SetLabels(map[string]string{bootimage.OSStreamLabel: o.osStream})
			Expect(c.Create(ctx, owner)).To(Succeed())
			if o.kind == "MachineDeployment" {
				// Its controller caught up: nothing rolling out.
				Expect(c.Get(ctx, client.ObjectKeyFromObject(owner), owner)).To(Succeed())
				Expect(unstructured.SetNestedField(owner.Object, map[string]any{
					"observedGeneration": owner.GetGeneration(), "replicas": int64(1),
					"conditions": []any{map[string]any{"type": "RollingOut", "status": "False", "reason": "NotRollingOut", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}},
				}, "status")).To(Succeed())
				Expect(c.Status().Update(ctx, owner)).To(Succeed())
			}
			owners[o.name] = owner
		}
		centos := owners["centos"].DeepCopy()
		Expect(c.Get(ctx, client.ObjectKeyFromObject(centos), centos)).To(Succeed())
		mgr, err := own.StartOperatorWithHooks(seams.Hooks{CRDPollInterval: 100 * time.Millisecond},
			controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mgr.Stop)

		// amiOf is the AMI of the template owner points at, once it points at a copy.
		amiOf := func(name string) func() any {
			return func() any {
				got := owners[name].DeepCopy()
				Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
				ref := fmt.Sprint(field(got.Object, "spec", "template", "spec", "infrastructureRef", "name"))
				if ref == name+"-0" {
					return "not copied"
				}
				t := template(ref)
				Expect(c.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
				return field(t.Object, "spec", "template", "spec", "ami", "id")
			}
		}
		Eventually(amiOf("rhel10")).Should(Equal(fixtures.RHEL10AWSAMIUSEast1))
		Eventually(amiOf("rhel9")).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Eventually(amiOf("rhel10-md")).Should(Equal(fixtures.RHEL10AWSAMIUSEast1))
		eventsOf := func() []string {
			return eventsIn(c, "MachineSet", "centos")
		}
		Eventually(eventsOf).Should(ContainElement(
			"OSStreamNotInBootImages: Boot image update skipped: label machineconfiguration.openshift.io/osstream=centos-10 names OS stream centos-10, which coreos-bootimages key streams does not carry (it has rhel-10, rhel-9)"))
		now := centos.DeepCopy()
		Expect(c.Get(ctx, client.ObjectKeyFromObject(now), now)).To(Succeed())
		Expect(now.GetResourceVersion()).To(Equal(centos.GetResourceVersion()), "never given another stream's image")
	})
})
