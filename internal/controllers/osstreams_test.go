package controllers_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// A fresh OpenShift 5.0 cluster (issue 34): coreos-bootimages carries rhel-9 and rhel-10 in
// streams, OSImageStream defaults to rhel-10, and the installer labels its objects.
var _ = Describe("OS streams on a 5.0 cluster", func() {
	// image reads the boot image of a providerSpec on the platform.
	type platformCase struct {
		platform      configv1.PlatformType
		providerSpec  func(region string) string
		image         func(ps map[string]any) any
		rhel9, rhel10 string
	}
	aws := platformCase{configv1.AWSPlatformType, func(region string) string { return fixtures.AWSProviderSpec(region, fixtures.OldAWSAMI) },
		func(ps map[string]any) any { return ps["ami"].(map[string]any)["id"] }, fixtures.NewAWSAMIUSEast1, fixtures.RHEL10AWSAMIUSEast1}
	gcp := platformCase{configv1.GCPPlatformType, func(string) string { return fixtures.GCPProviderSpec(fixtures.OldGCPImage) },
		func(ps map[string]any) any { return ps["disks"].([]any)[0].(map[string]any)["image"] }, fixtures.NewGCPImage, fixtures.RHEL10GCPImage}
	azure := platformCase{configv1.AzurePlatformType, func(string) string { return fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, "") },
		func(ps map[string]any) any { return ps["image"].(map[string]any)["sku"] }, fixtures.NewAzureNoPlanSKU + "_v2", fixtures.RHEL10AzureNoPlanSKU}

	DescribeTable("updates each object to its own stream's image in one pass, and never gives one the other stream's",
		func(p platformCase) {
			cluster(p.platform, true)
			labelled := func(name, osStream, region string) *machinev1beta1.MachineSet {
				ms := fixtures.MachineSet(name, p.providerSpec(region))
				if osStream != "" {
					fixtures.Labelled(osStream, &ms.Labels, &ms.Spec.Template.Labels)
				}
				return ms
			}
			cpms := fixtures.ControlPlaneMachineSet(p.providerSpec("us-east-1"), machinev1.ControlPlaneMachineSetStateActive)
			fixtures.Labelled("rhel-10", &cpms.Labels, &cpms.Spec.Template.OpenShiftMachineV1Beta1Machine.ObjectMeta.Labels)
			objs := []client.Object{
				fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{
					fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, operatorv1.All, nil)}}),
				fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion),
				fixtures.OSImageStream("rhel-10"), fixtures.Pool("worker", ""), fixtures.Pool("master", ""),
				fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
				labelled("rhel10", "rhel-10", "us-east-1"), labelled("rhel9", "rhel-9", "us-east-1"),
				labelled("unlabelled", "", "us-east-1"), labelled("centos", "centos-10", "us-east-1"), cpms,
			}
			if p.platform == configv1.AWSPlatformType {
				objs = append(objs, labelled("rhel10-west", "rhel-10", "us-west-2"))
			}
			Expect(fixtures.Create(ctx, k8s, objs...)).To(Succeed())
			DeferCleanup(func() {
				Expect(k8s.DeleteAllOf(ctx, &machinev1.ControlPlaneMachineSet{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
				Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kube.MCONamespace))).To(Succeed())
				Expect(k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
				Expect(k8s.DeleteAllOf(ctx, &mcfgv1.MachineConfigPool{})).To(Succeed())
				Expect(k8s.DeleteAllOf(ctx, &mcfgv1.OSImageStream{})).To(Succeed())
			})
			untouched := map[string]string{"centos": resourceVersionOf("centos")()}
			if p.platform == configv1.AWSPlatformType {
				untouched["rhel10-west"] = resourceVersionOf("rhel10-west")()
			}
			mgr := startOperator(controllers.Options{Images: staticImages})
			DeferCleanup(mgr.Stop)

			imageOf := func(name string) func() any { return func() any { return p.image(providerSpec(name)) } }
			Eventually(imageOf("rhel10")).Should(Equal(p.rhel10))
			Eventually(imageOf("rhel9")).Should(Equal(p.rhel9))
			Eventually(imageOf("unlabelled")).Should(Equal(p.rhel10), "an unlabelled MachineSet of the worker pool takes the cluster's default stream")
			Eventually(func() any { return p.image(cpmsProviderSpec()) }).Should(Equal(p.rhel10))
			Eventually(machineSetEvents("centos")).Should(ContainElement(
				"OSStreamNotInBootImages: Boot image update skipped: label machineconfiguration.openshift.io/osstream=centos-10 names OS stream centos-10, which coreos-bootimages key streams does not carry (it has rhel-10, rhel-9)"))
			Eventually(machineSetEvents("centos")).Should(ContainElement(bootimage.ReasonOSStreamMismatch+
				": It names OS stream centos-10, which coreos-bootimages does not carry, so it keeps its boot image; its machines join MachineConfigPool worker, which runs rhel-10 (OSImageStream cluster status.defaultStream); make the label and the pool agree"),
				"nothing is booted and then rebased: the object keeps its image")
			Eventually(machineSetEvents("rhel9")).Should(ContainElement(HavePrefix(bootimage.ReasonOSStreamMismatch +
				": The boot image comes from OS stream rhel-9, but its machines join MachineConfigPool worker, which runs rhel-10")))
			if p.platform == configv1.AWSPlatformType {
				Eventually(machineSetEvents("rhel10-west")).Should(ContainElement(
					"RegionNotInStream: Boot image update skipped: the rhel-10 stream has no x86_64 AMI for region us-west-2 (it has AMIs in us-east-1, us-gov-west-1)"))
			}
			// Their decisions are taken and reported, so no patch is coming.
			for name, rv := range untouched {
				Expect(resourceVersionOf(name)()).To(Equal(rv), "%s was not written", name)
			}
			Expect(machineSetEvents("rhel10")()).NotTo(ContainElement(HavePrefix(bootimage.ReasonOSStreamMismatch)))
		},
		Entry("on AWS", aws), Entry("on GCP", gcp), Entry("on Azure", azure),
	)

	It("says a malformed entry of streams as broken input, degraded, whether or not an object boots it, and updates the other stream's objects", func() {
		cluster(configv1.GCPPlatformType, true)
		bootImages := fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion)
		var streams map[string]json.RawMessage
		Expect(json.Unmarshal([]byte(bootImages.Data["streams"]), &streams)).To(Succeed())
		streams["rhel-10"] = json.RawMessage(`{"stream": "rhcos-5.0", "architectures": "garbage"}`)
		data, err := json.Marshal(streams)
		Expect(err).NotTo(HaveOccurred())
		bootImages.Data["streams"] = string(data)
		rhel9 := fixtures.MachineSet("rhel9", fixtures.GCPProviderSpec(fixtures.OldGCPImage))
		fixtures.Labelled("rhel-9", &rhel9.Labels, &rhel9.Spec.Template.Labels)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineConfiguration(nil), bootImages, fixtures.OSImageStream("rhel-9"),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3), rhel9)).To(Succeed())
		DeferCleanup(func() {
			Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kube.MCONamespace))).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &mcfgv1.OSImageStream{})).To(Succeed())
		})
		mgr := startOperator(controllers.Options{Images: staticImages})
		DeferCleanup(mgr.Stop)

		Eventually(func() any { return providerSpec("rhel9")["disks"].([]any)[0].(map[string]any)["image"] }).Should(Equal(fixtures.NewGCPImage))
		broken := "ConfigMap openshift-machine-config-operator/coreos-bootimages key streams, entry rhel-10: not a CoreOS stream: a string at architectures where an object is expected"
		Eventually(condition("BootImageUpdateDegraded")).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring(broken))))
		Eventually(eventNotes(bootimage.ReasonInvalidStream)).Should(ContainElement(broken))
	})

	It("takes a pool's new stream for its unlabelled MachineSets", func() {
		cluster(configv1.GCPPlatformType, true)
		Expect(fixtures.Create(ctx, k8s,
			fixtures.MachineConfiguration(nil),
			fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion),
			fixtures.OSImageStream("rhel-9"), fixtures.Pool("worker", ""),
			fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
			fixtures.MachineSet("unlabelled", fixtures.GCPProviderSpec(fixtures.OldGCPImage)),
		)).To(Succeed())
		DeferCleanup(func() {
			Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kube.MCONamespace))).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &mcfgv1.MachineConfigPool{})).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &mcfgv1.OSImageStream{})).To(Succeed())
		})
		mgr := startOperator(controllers.Options{Images: staticImages})
		DeferCleanup(mgr.Stop)
		image := func() any { return providerSpec("unlabelled")["disks"].([]any)[0].(map[string]any)["image"] }
		Eventually(image).Should(Equal(fixtures.NewGCPImage), "an upgraded cluster's default, rhel-9")

		pool := &mcfgv1.MachineConfigPool{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "worker"}, pool)).To(Succeed())
		pool.Spec.OSImageStream.Name = "rhel-10"
		Expect(k8s.Update(ctx, pool)).To(Succeed())
		Eventually(image).Should(Equal(fixtures.RHEL10GCPImage), "the watch on the pool re-decides")
	})
})
