package controllers_test

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	embedding "github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

var staticImages = (&awscloud.Static{AMIs: fixtures.AWSImages()}).Clouds()

// bootImageCluster seeds a stable cluster on platform with the stream and a spec 3 user-data stub.
func bootImageCluster(platform configv1.PlatformType) {
	GinkgoHelper()
	cluster(platform, true)
	Expect(fixtures.Create(ctx, k8s,
		fixtures.MachineConfiguration(nil),
		fixtures.BootImagesConfigMap(fixtures.Stream(), "4.20.3"),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
	)).To(Succeed())
	DeferCleanup(func() {
		Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kube.MCONamespace))).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
	})
}

func getMachineSet(name string) *machinev1beta1.MachineSet {
	GinkgoHelper()
	ms := &machinev1beta1.MachineSet{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: name}, ms)).To(Succeed())
	return ms
}

func providerSpec(name string) map[string]any {
	GinkgoHelper()
	var ps map[string]any
	Expect(json.Unmarshal(getMachineSet(name).Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
	return ps
}

func amiOf(name string) func() any {
	return func() any { return providerSpec(name)["ami"].(map[string]any)["id"] }
}

func resourceVersionOf(name string) func() string {
	return func() string { return getMachineSet(name).ResourceVersion }
}

// machineSetEvents returns "reason: message" of the Events about MachineSet name.
func machineSetEvents(name string) func() []string {
	return func() []string {
		list := &corev1.EventList{}
		Expect(k8s.List(ctx, list, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "MachineSet" && e.InvolvedObject.Name == name {
				out = append(out, e.Reason+": "+e.Message)
			}
		}
		return out
	}
}

func condition(condType string) func() metav1.Condition {
	return func() metav1.Condition {
		c := meta.FindStatusCondition(machineConfiguration().Status.Conditions, condType)
		if c == nil {
			return metav1.Condition{}
		}
		return *c
	}
}

// withoutImage returns obj as generic JSON without what a boot image patch may change: the image
// fields of the providerSpec at path, the attempts annotation and the server's bookkeeping.
func withoutImage(obj client.Object, path ...string) map[string]any {
	GinkgoHelper()
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	Expect(err).NotTo(HaveOccurred())
	md := raw["metadata"].(map[string]any)
	for _, f := range []string{"resourceVersion", "generation", "managedFields"} {
		delete(md, f)
	}
	if a, ok := md["annotations"].(map[string]any); ok {
		delete(a, bootimage.AttemptsAnnotation)
		delete(a, bootimage.HistoryAnnotation)
		if len(a) == 0 {
			delete(md, "annotations")
		}
	}
	ps, found, err := unstructured.NestedMap(raw, path...)
	Expect(err).NotTo(HaveOccurred())
	Expect(found).To(BeTrue(), "providerSpec at %v", path)
	delete(ps, "ami")
	delete(ps, "image")
	if disks, ok := ps["disks"].([]any); ok {
		for _, d := range disks {
			delete(d.(map[string]any), "image")
		}
	}
	Expect(unstructured.SetNestedMap(raw, ps, path...)).To(Succeed())
	return raw
}

var machineSetProviderSpec = []string{"spec", "template", "spec", "providerSpec", "value"}

var _ = Describe("MachineSet boot images", func() {
	var mgr *testenv.Manager
	start := func() {
		mgr = startOperator(embedding.Options{Images: staticImages})
		DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })
	}

	DescribeTable("updates an outdated RHCOS MachineSet, touching only the image",
		func(platform configv1.PlatformType, spec string, image func(map[string]any) any, want any) {
			bootImageCluster(platform)
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", spec))).To(Succeed())
			before := getMachineSet("worker-a")
			start()

			Eventually(func() any { return image(providerSpec("worker-a")) }).Should(Equal(want))
			after := getMachineSet("worker-a")
			Expect(withoutImage(after, machineSetProviderSpec...)).To(Equal(withoutImage(before, machineSetProviderSpec...)), "nothing but the boot image changed")
			Expect(after.Annotations[bootimage.AttemptsAnnotation]).To(ContainSubstring(`"count":1`))
			Eventually(machineSetEvents("worker-a")).Should(ContainElement(ContainSubstring("BootImageUpdated: Updated boot image from")))
			Eventually(condition(status.ConditionBootImageUpdateProgressing)).Should(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Message", "Reconciled 1 of 1 MAPI MachineSets (0 skipped) | Reconciled 0 of 0 ControlPlaneMachineSets (0 skipped)")))
			Expect(condition(status.ConditionBootImageUpdateDegraded)()).To(HaveField("Status", metav1.ConditionFalse))
		},
		Entry("AWS", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI),
			func(ps map[string]any) any { return ps["ami"].(map[string]any)["id"] }, fixtures.NewAWSAMIUSEast1),
		Entry("AWS Marketplace", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-east-1", fixtures.OldMarketplaceAMI),
			func(ps map[string]any) any { return ps["ami"].(map[string]any)["id"] }, fixtures.NewMarketplaceAMI),
		Entry("GCP", configv1.GCPPlatformType, fixtures.GCPProviderSpec(fixtures.OldGCPImage),
			func(ps map[string]any) any { return ps["disks"].([]any)[0].(map[string]any)["image"] }, fixtures.NewGCPImage),
		Entry("Azure", configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, ""),
			func(ps map[string]any) any { return ps["image"].(map[string]any)["sku"] }, fixtures.NewAzureNoPlanSKU+"_v2"),
	)

	It("leaves alone, with a reason anyone can read, what it must not touch", func() {
		bootImageCluster(configv1.AWSPlatformType)
		owned := fixtures.MachineSet("owned", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "hive.openshift.io/v1", Kind: "MachinePool", Name: "pool", UID: "1234"}}
		windows := fixtures.MachineSet("windows", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		windows.Spec.Template.Labels[bootimage.WindowsLabel] = "Windows"
		rhel10 := fixtures.MachineSet("rhel10", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		rhel10.Labels[bootimage.OSStreamLabel] = "rhel-10"
		badArch := fixtures.MachineSet("bad-arch", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		badArch.Annotations[bootimage.ArchAnnotation] = "kubernetes.io/arch=sparc64"
		power := fixtures.MachineSet("power", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		power.Annotations[bootimage.ArchAnnotation] = "kubernetes.io/arch=ppc64le"
		badUserData := fixtures.MachineSet("bad-user-data", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI))
		badUserData.Spec.Template.Spec.ProviderSpec.Value.Raw = []byte(fmt.Sprintf(`{"ami":{"id":%q},"placement":{"region":"us-east-1"},"userDataSecret":{"name":"broken-user-data"}}`, fixtures.OldAWSAMI))
		cases := map[*machinev1beta1.MachineSet]string{
			owned:       "OwnedByController: Boot image update skipped: owned by MachinePool pool",
			windows:     "WindowsMachineSet: Boot image update skipped: Windows machines",
			rhel10:      "OSStreamNotInBootImages: Boot image update skipped: label machineconfiguration.openshift.io/osstream=rhel-10 names OS stream rhel-10, but coreos-bootimages has no streams key",
			badArch:     `InvalidArchitecture: Boot image update failed: annotation capacity.cluster-autoscaler.kubernetes.io/labels names architecture "sparc64"`,
			power:       "ArchitectureNotInStream: Boot image update skipped: the rhel-9 stream has no ppc64le boot images",
			badUserData: "InvalidUserData: Boot image update failed: user-data Secret openshift-machine-api/broken-user-data: userData is not a JSON object",
			fixtures.MachineSet("custom", fixtures.AWSProviderSpec("us-east-1", fixtures.CustomAMI)):                                 "CustomImage: Boot image update skipped: AMI ami-0c0570c0570c05700 is owned by account 123456789012",
			fixtures.MachineSet("by-arn", `{"ami":{"arn":"arn:aws:ec2:us-east-1::image/ami-1"},"placement":{"region":"us-east-1"}}`): "ImageNotByID: Boot image update skipped: the AMI is given by ARN, not by id",
			fixtures.MachineSet("far-away", fixtures.AWSProviderSpec("ap-south-1", fixtures.OldAWSAMI)):                              "ImageNotFound: Boot image update failed: AMI ami-0aaaaaaaaaaaaaa01 does not exist in region ap-south-1",
			fixtures.MachineSet("garbage", `{"ami": 42}`):                                                                            "InvalidProviderSpec: Boot image update failed: providerSpec: field ami",
		}
		versions := map[string]string{}
		for ms := range cases {
			Expect(fixtures.Create(ctx, k8s, ms)).To(Succeed())
			versions[ms.Name] = ms.ResourceVersion
		}
		Expect(fixtures.Create(ctx, k8s, fixtures.UserDataSecret("broken-user-data", "#!/bin/sh\necho not ignition"))).To(Succeed())
		start()

		for ms, event := range cases {
			Eventually(machineSetEvents(ms.Name)).Should(ConsistOf(HavePrefix(event)), ms.Name)
		}
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", HavePrefix("Reconciled 6 of 10 MAPI MachineSets (6 skipped, 4 failed) | Reconciled 0 of 0 ControlPlaneMachineSets (0 skipped) | 4 failed: ")),
			HaveField("Message", ContainSubstring("MachineSet openshift-machine-api/bad-user-data: InvalidUserData")),
		))
		for name, rv := range versions {
			Expect(resourceVersionOf(name)()).To(Equal(rv), "%s was not written", name)
		}
		Expect(eventNotes(steps.ReasonBootImageUpdated)()).To(BeEmpty())
	})

	It("upgrades a spec 2 user-data stub before pointing the MachineSet at the new image", func() {
		bootImageCluster(configv1.AWSPlatformType)
		Expect(fixtures.Create(ctx, k8s,
			fixtures.UserDataSecret("legacy-user-data", fixtures.IgnitionStubV2),
			fixtures.MachineSet("legacy", fmt.Sprintf(`{"ami":{"id":%q},"placement":{"region":"us-east-1"},"userDataSecret":{"name":"legacy-user-data"}}`, fixtures.OldAWSAMI)),
		)).To(Succeed())
		start()

		Eventually(amiOf("legacy")).Should(Equal(fixtures.NewAWSAMIUSEast1))
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "legacy-user-data"}, secret)).To(Succeed())
		Expect(secret.Annotations).To(HaveKeyWithValue(steps.UserDataUpgradedFromAnnotation, "2.2.0"))
		Expect(secret.Annotations).To(HaveKey(steps.UserDataUpgradedAtAnnotation))
		Expect(string(secret.Data["userData"])).To(ContainSubstring(`"version":"3.2.0"`))
		Expect(string(secret.Data["userData"])).To(ContainSubstring(`"merge":[{"source":"https://api-int.demo.example.com:22623/config/worker"`))
		Expect(secret.Data).To(HaveKeyWithValue("disableTemplating", []byte("true")), "other keys kept")
	})

	It("writes an upgraded user-data stub only over the Secret it was computed from", func() {
		Expect(fixtures.Create(ctx, k8s, fixtures.UserDataSecret("raced-user-data", fixtures.IgnitionStubV2))).To(Succeed())
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "raced-user-data"}, secret)).To(Succeed())
		read := &bootimage.UserData{SecretName: secret.Name, Found: true, Data: secret.Data["userData"], ResourceVersion: secret.ResourceVersion}
		// Someone changes the Secret after the stub was computed from it.
		secret.Data["userData"] = []byte(`{"ignition":{"version":"3.2.0"}}`)
		Expect(k8s.Update(ctx, secret)).To(Succeed())

		err := controllers.UpgradeUserDataForTest(ctx, k8s, record.NewFakeRecorder(10), read)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		Expect(string(secret.Data["userData"])).To(Equal(`{"ignition":{"version":"3.2.0"}}`), "the newer content is kept")
	})

	It("converts a spec 2 stub that carries content besides the pointer, as the MCO does, and then updates the MachineSet", func() {
		bootImageCluster(configv1.AWSPlatformType)
		stub := `{"ignition":{"version":"2.2.0","config":{"append":[{"source":"https://api-int.demo.example.com:22623/config/worker"}]}},` +
			`"storage":{"files":[{"filesystem":"root","path":"/etc/motd","mode":420,"contents":{"source":"data:,hello"}}]},` +
			`"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA core"]}]}}`
		Expect(fixtures.Create(ctx, k8s,
			fixtures.UserDataSecret("content-user-data", stub),
			fixtures.MachineSet("content", fmt.Sprintf(`{"ami":{"id":%q},"placement":{"region":"us-east-1"},"userDataSecret":{"name":"content-user-data"}}`, fixtures.OldAWSAMI)),
		)).To(Succeed())
		start()

		Eventually(amiOf("content")).Should(Equal(fixtures.NewAWSAMIUSEast1))
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: "content-user-data"}, secret)).To(Succeed())
		Expect(secret.Annotations).To(HaveKeyWithValue(steps.UserDataUpgradedFromAnnotation, "2.2.0"))
		var cfg map[string]any
		Expect(json.Unmarshal(secret.Data["userData"], &cfg)).To(Succeed())
		Expect(cfg).To(HaveKeyWithValue("ignition", HaveKeyWithValue("version", "3.2.0")))
		Expect(cfg).To(HaveKeyWithValue("storage", HaveKeyWithValue("files", ConsistOf(HaveKeyWithValue("path", "/etc/motd")))))
		Expect(cfg).To(HaveKeyWithValue("passwd", HaveKeyWithValue("users", ConsistOf(HaveKeyWithValue("name", "core")))))
	})

	It("stops after three patches that something reverts, and stays stopped across a restart", func() {
		bootImageCluster(configv1.AWSPlatformType)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("reverted", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))).To(Succeed())
		start()

		revert := []byte(fmt.Sprintf(`{"spec":{"template":{"spec":{"providerSpec":{"value":{"ami":{"id":%q}}}}}}}`, fixtures.OldAWSAMI))
		for range bootimage.HotLoopLimit {
			Eventually(amiOf("reverted")).Should(Equal(fixtures.NewAWSAMIUSEast1))
			Expect(k8s.Patch(ctx, getMachineSet("reverted"), client.RawPatch("application/merge-patch+json", revert))).To(Succeed())
		}
		hotLoop := And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring(
			"refusing to reconcile machineset reverted, hot loop detected. Please opt-out of boot image updates, adjust your machine provisioning workflow to prevent hot loops and opt back in to resume boot image updates")))
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(hotLoop)
		expectNoWrites(recordWrites(&machinev1beta1.MachineSetList{}), getMachineSet("reverted"), "machineset", 1)

		By("restarting the operator")
		Expect(mgr.Stop()).To(Succeed())
		writes := recordWrites(&machinev1beta1.MachineSetList{})
		start()
		// The new process decides again and says so in an Event of its own, beside the first.
		Eventually(machineSetEvents("reverted")).Should(ContainElements(HavePrefix("HotLoopDetected"), HavePrefix("HotLoopDetected")))
		expectNoWrites(writes, getMachineSet("reverted"), "machineset", 1)
		Expect(condition(status.ConditionBootImageUpdateDegraded)()).To(hotLoop)

		By("opting out and back in")
		// The CRD refuses an opt-out while the skew enforcement status is Automatic: an admin first
		// turns enforcement off and waits for the status to say so.
		skewOff := []byte(`{"spec":{"bootImageSkewEnforcement":{"mode":"None"}}}`)
		Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json", skewOff))).To(Succeed())
		Eventually(func() operatorv1.BootImageSkewEnforcementModeStatus {
			return machineConfiguration().Status.BootImageSkewEnforcementStatus.Mode
		}).Should(Equal(operatorv1.BootImageSkewEnforcementModeStatusNone))
		By("a MachineConfiguration change other than the selection keeps the count")
		expectNoWrites(recordWrites(&machinev1beta1.MachineSetList{}), getMachineSet("reverted"), "machineset", 1)
		Expect(condition(status.ConditionBootImageUpdateDegraded)()).To(hotLoop)
		optOut := []byte(`{"spec":{"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"None"}}]}}}`)
		Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json", optOut))).To(Succeed())
		Eventually(condition(status.ConditionBootImageUpdateDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		optIn := []byte(`{"spec":{"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"All"}}]}}}`)
		Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json", optIn))).To(Succeed())
		Eventually(amiOf("reverted")).Should(Equal(fixtures.NewAWSAMIUSEast1))
	})

	DescribeTable("writes nothing while it must not act",
		func(setUp func(), reason string) {
			bootImageCluster(configv1.AWSPlatformType)
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))).To(Succeed())
			setUp()
			writes := recordWrites(&machinev1beta1.MachineSetList{})
			start()
			// A problem of the stream is the cluster's, said once on MachineConfiguration/cluster.
			events := machineSetEvents("worker-a")
			if reason == "InvalidStream" || reason == "StreamMissing" {
				events = machineConfigurationEvents
			}
			Eventually(events).Should(ContainElement(HavePrefix(reason)))
			expectNoWrites(writes, getMachineSet("worker-a"), "machineset", 1)
		},
		Entry("the AWS gate is off", func() {
			gate := &configv1.FeatureGate{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, gate)).To(Succeed())
			Expect(fixtures.SetStatus(ctx, k8s, gate, fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, nil, []configv1.FeatureGateName{"ManagedBootImagesAWS"}))).To(Succeed())
		}, "FeatureGateDisabled"),
		Entry("the cluster is upgrading", func() {
			cv := &configv1.ClusterVersion{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "version"}, cv)).To(Succeed())
			Expect(fixtures.SetStatus(ctx, k8s, cv, fixtures.ClusterVersion("4.21.0", false))).To(Succeed())
		}, "ClusterNotStable"),
		Entry("MachineSets are opted out", func() {
			patch := []byte(`{"spec":{"bootImageSkewEnforcement":{"mode":"None"},"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"None"}}]}}}`)
			Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		}, "NotSelected"),
		Entry("the stream is malformed", func() {
			cm := &corev1.ConfigMap{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: kube.MCONamespace, Name: kube.BootImagesConfigMapName}, cm)).To(Succeed())
			cm.Data["stream"] = `{"architectures": "nope"}`
			Expect(k8s.Update(ctx, cm)).To(Succeed())
		}, "InvalidStream"),
		Entry("the stream is missing", func() {
			Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(kube.MCONamespace))).To(Succeed())
		}, "StreamMissing"),
	)

	It("acts once an opted-out MachineSet is selected by label", func() {
		bootImageCluster(configv1.AWSPlatformType)
		patch := []byte(`{"spec":{"bootImageSkewEnforcement":{"mode":"None"},"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"Partial","partial":{"machineResourceSelector":{"matchLabels":{"boot-images":"managed"}}}}}]}}}`)
		Expect(k8s.Patch(ctx, machineConfiguration(), client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)))).To(Succeed())
		start()
		Eventually(machineSetEvents("worker-a")).Should(ContainElement(HavePrefix("NotSelected")))
		Expect(amiOf("worker-a")()).To(Equal(fixtures.OldAWSAMI))

		ms := getMachineSet("worker-a")
		ms.Labels["boot-images"] = "managed"
		Expect(k8s.Update(ctx, ms)).To(Succeed())
		Eventually(amiOf("worker-a")).Should(Equal(fixtures.NewAWSAMIUSEast1))
	})
})

var _ = Describe("MachineSet boot images through EC2", func() {
	It("classifies and pre-flights AMIs with the real SDK at the Infrastructure's ec2 endpoint", func() {
		server := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(server.Close)
		awsClusterAt(server)
		Expect(fixtures.Create(ctx, k8s,
			fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
			fixtures.MachineSet("custom", fixtures.AWSProviderSpec("us-east-1", fixtures.CustomAMI)),
		)).To(Succeed())
		mgr := startOperator(embedding.Options{CloudRootCAs: server.RootCAs()})
		DeferCleanup(mgr.Stop)

		Eventually(amiOf("worker-a")).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Eventually(machineSetEvents("custom")).Should(ContainElement(ContainSubstring("owned by account 123456789012")))
		Expect(server.Calls.Load()).To(BeNumerically(">", 0))
	})
})

var _ = Describe("MachineSet boot images left alone elsewhere", func() {
	noArch := func(ms *machinev1beta1.MachineSet) { delete(ms.Annotations, bootimage.ArchAnnotation) }
	arch := func(a string) func(*machinev1beta1.MachineSet) {
		return func(ms *machinev1beta1.MachineSet) {
			ms.Annotations[bootimage.ArchAnnotation] = "kubernetes.io/arch=" + a
		}
	}
	multiArch := func() {
		cv := &configv1.ClusterVersion{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "version"}, cv)).To(Succeed())
		want := cv.DeepCopy()
		want.Status.Desired.Architecture = configv1.ClusterVersionArchitectureMulti
		Expect(fixtures.SetStatus(ctx, k8s, cv, want)).To(Succeed())
	}
	rhcosInAPSouth := (&awscloud.Static{AMIs: []aws.Image{{ImageID: fixtures.OldAWSAMI, OwnerID: aws.RHCOSOwner, Region: "ap-south-1", State: "available"}}}).Clouds()
	oldOnly := (&awscloud.Static{AMIs: fixtures.AWSImages()[:2]}).Clouds()

	DescribeTable("with a reason anyone can read",
		func(platform configv1.PlatformType, providerSpec string, mutate func(*machinev1beta1.MachineSet), setUp func(), images bootimage.Clouds, event string) {
			bootImageCluster(platform)
			if setUp != nil {
				setUp()
			}
			ms := fixtures.MachineSet("worker-a", providerSpec)
			if mutate != nil {
				mutate(ms)
			}
			Expect(fixtures.Create(ctx, k8s, ms)).To(Succeed())
			rv := ms.ResourceVersion
			mgr := startOperator(embedding.Options{Images: images})
			DeferCleanup(mgr.Stop)
			Eventually(machineSetEvents("worker-a")).Should(ConsistOf(HavePrefix(event)))
			Expect(resourceVersionOf("worker-a")()).To(Equal(rv))
		},
		Entry("an Azure confidential VM", configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, "ConfidentialVM"), nil, nil, staticImages,
			"ConfidentialVM: Boot image update skipped: securityProfile.settings.securityType is ConfidentialVM"),
		Entry("s390x on Azure", configv1.AzurePlatformType, fixtures.AzureProviderSpec(fixtures.DefaultAzureImage, ""), arch("s390x"), nil, staticImages,
			"UnsupportedArchitecture: Boot image update skipped: Azure has no s390x boot images"),
		Entry("a GCP marketplace image", configv1.GCPPlatformType, fixtures.GCPProviderSpec("projects/redhat-marketplace-public/global/images/redhat-coreos-ocp-413-x86-64-202305021736"), nil, nil, staticImages,
			"CustomImage: Boot image update skipped: boot image projects/redhat-marketplace-public/global/images/redhat-coreos-ocp-413-x86-64-202305021736 is not an RHCOS image"),
		Entry("a vSphere template", configv1.VSpherePlatformType, fixtures.VSphereProviderSpec(fixtures.OldVSphereTmpl), nil, nil, staticImages,
			"FailureDomainMismatch: Boot image update skipped: providerSpec workspace (server: vcenter.example.com"),
		Entry("no architecture on a multi-arch cluster", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), noArch, multiArch, staticImages,
			"ArchitectureUnknown: Boot image update skipped: multi-architecture cluster and no kubernetes.io/arch"),
		Entry("a region the stream does not list", configv1.AWSPlatformType, fixtures.AWSProviderSpec("ap-south-1", fixtures.OldAWSAMI), nil, nil, rhcosInAPSouth,
			"RegionNotInStream: Boot image update skipped: the rhel-9 stream has no x86_64 AMI for region ap-south-1 (it has AMIs in eu-west-1, us-east-1, us-west-2)"),
		Entry("a target AMI EC2 does not have", configv1.AWSPlatformType, fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), nil, nil, oldOnly,
			"TargetImageUnavailable: Boot image update skipped: target AMI ami-0f1e2d3c4b5a69788 is not found in us-east-1"),
	)
})
