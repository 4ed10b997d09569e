package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	embedding "github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers/steps"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

const (
	// copyRegion has no AMI in the rhel-9 stream: the installer copied the us-east-1 one there.
	copyRegion = "ap-south-1"
	// The access keys of the Machine API's Secret (lookups) and of the operator's own (copies).
	lookupKey = "AKIAMACHINEAPI000001"
	copyKey   = "AKIABOOTIMAGEOP00001"
)

// installerCopyImage is the installer's copy of the old AMI into copyRegion, as it tags it.
func installerCopyImage() aws.Image {
	return aws.Image{ImageID: "ami-0installer0000001", OwnerID: fakecloud.SelfAccount, Name: "demo-x7k2p-master", Region: copyRegion, State: "available",
		CreationDate: "2024-07-01T00:00:00.000Z", Tags: map[string]string{
			aws.TagName: aws.InstallerCopyName("demo-x7k2p", copyRegion), aws.OwnedTag("demo-x7k2p"): "owned",
			aws.TagSourceAMI: fixtures.OldAWSAMI, aws.TagSourceRegion: "us-east-1",
		}}
}

// copyCluster seeds an AWS cluster whose EC2 is ec2, with the Machine API's credentials and, when
// withCopyCredentials, the operator's own.
func copyCluster(ec2 *fakecloud.EC2, withCopyCredentials bool) {
	GinkgoHelper()
	bootImageCluster(configv1.AWSPlatformType)
	reachEC2(ec2, withCopyCredentials)
}

// reachEC2 points the cluster at ec2, with the Machine API's credentials and, when
// withCopyCredentials, the operator's own.
func reachEC2(ec2 *fakecloud.EC2, withCopyCredentials bool) {
	GinkgoHelper()
	infra := &configv1.Infrastructure{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)).To(Succeed())
	withEndpoint := infra.DeepCopy()
	withEndpoint.Status.PlatformStatus.AWS.ServiceEndpoints = []configv1.AWSServiceEndpoint{{Name: "ec2", URL: ec2.URL}}
	Expect(fixtures.SetStatus(ctx, k8s, infra, withEndpoint)).To(Succeed())
	secret := func(name, key string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fixtures.MachineAPINamespace, Name: name},
			Data: map[string][]byte{"aws_access_key_id": []byte(key), "aws_secret_access_key": []byte("secret")}}
	}
	Expect(fixtures.Create(ctx, k8s, secret(aws.CredentialsSecret, lookupKey))).To(Succeed())
	if withCopyCredentials {
		Expect(fixtures.Create(ctx, k8s, secret(aws.CopyCredentialsSecret, copyKey))).To(Succeed())
	}
}

func startCopying(ec2 *fakecloud.EC2) *testenv.Manager {
	GinkgoHelper()
	mgr := startOperatorWithHooks(embedding.Options{CloudRootCAs: ec2.RootCAs()}, seams.Hooks{CopyPoll: 100 * time.Millisecond})
	DeferCleanup(mgr.Stop)
	return mgr
}

var _ = Describe("AWS regions the stream lacks: the installer's AMI copy, made anew", func() {
	var ec2 *fakecloud.EC2
	BeforeEach(func() {
		ec2 = fakecloud.NewEC2(append(fixtures.AWSImages(), installerCopyImage()))
		DeferCleanup(ec2.Close)
	})
	byFilter := fixtures.AWSProviderSpecByFilter(copyRegion, "demo-x7k2p")

	It("copies once for every MachineSet, writes nothing while the copy is pending, then boots it by id", func() {
		copyCluster(ec2, true)
		names := []string{"worker-a", "worker-b", "worker-c"}
		for _, name := range names {
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet(name, byFilter))).To(Succeed())
		}
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("custom", fixtures.AWSProviderSpec(copyRegion, fixtures.CustomAMI)))).To(Succeed())
		writes := recordWrites(&machinev1beta1.MachineSetList{})
		ec2.AddImages(aws.Image{ImageID: fixtures.CustomAMI, OwnerID: fakecloud.SelfAccount, Region: copyRegion, State: "available"})
		startCopying(ec2)

		Eventually(ec2.CopyRequests).Should(HaveLen(1))
		made := ec2.CopyRequests()[0]
		Expect(made).To(And(
			HaveField("Region", copyRegion), HaveField("SourceRegion", "us-east-1"), HaveField("SourceImageID", fixtures.NewAWSAMIUSEast1),
			HaveField("Encrypted", true), HaveField("KMSKeyID", ""), HaveField("AccessKeyID", copyKey),
		), "signed for the region it copies into, with the operator's own credentials, encrypted with the default EBS key")
		for _, kind := range []string{"image", "snapshot"} {
			Expect(made.Tags[kind]).To(And(HaveKeyWithValue(aws.OwnedTag("demo-x7k2p"), "owned"), HaveKeyWithValue(aws.TagSourceAMI, fixtures.NewAWSAMIUSEast1),
				HaveKeyWithValue(aws.TagSourceRegion, "us-east-1"), HaveKeyWithValue(aws.TagCopiedBy, "bootimage-operator")), "tags of the %s", kind)
		}
		Eventually(eventNotes(steps.ReasonCopyingImage)).Should(HaveLen(1), "the copy is announced once")
		// Polls of the pending copy: each asks EC2 again; none may patch.
		lookups := len(ec2.Requests())
		Eventually(func() int { return len(ec2.Requests()) }).Should(BeNumerically(">", lookups+3))
		for _, name := range names {
			Expect(writes.Of(client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: name})).To(BeEmpty(), "%s written while its copy is pending", name)
		}

		ec2.CompleteCopies()
		for _, name := range names {
			Eventually(amiOf(name)).Should(Equal(made.ImageID))
			Expect(providerSpec(name)["ami"]).To(Equal(map[string]any{"id": made.ImageID}), "the installer's filter gives way to the id")
			// The watch may report the patch after the read above: wait for it, and for any after it.
			seen, err := writes.Barrier(ctx, k8s, &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: fixtures.MachineAPINamespace, Name: name}})
			Expect(err).NotTo(HaveOccurred())
			Expect(seen).To(HaveLen(1), "one patch, to the available copy")
		}
		Expect(ec2.CopyCalls.Load()).To(BeEquivalentTo(1), "one CopyImage for every object")
		Expect(amiOf("custom")()).To(Equal(fixtures.CustomAMI))
		Expect(ec2.Requests()).To(HaveEach(HaveField("AccessKeyID", lookupKey)), "lookups keep the Machine API's credentials")
	})

	It("makes no second copy after a restart mid-copy, nor with a second replica running", func() {
		copyCluster(ec2, true)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", byFilter), fixtures.MachineSet("worker-b", byFilter))).To(Succeed())
		first := startCopying(ec2)
		Eventually(ec2.CopyRequests).Should(HaveLen(1))
		first.Stop()

		// A new process knows nothing of the copy but what EC2's tags say; two of them at once.
		lookups := len(ec2.Requests())
		startCopying(ec2)
		startCopying(ec2)
		Eventually(func() int { return len(ec2.Requests()) }).Should(BeNumerically(">", lookups+4))
		ec2.CompleteCopies()
		Eventually(amiOf("worker-a")).Should(Equal(ec2.CopyRequests()[0].ImageID))
		Eventually(amiOf("worker-b")).Should(Equal(ec2.CopyRequests()[0].ImageID))
		Expect(ec2.CopyRequests()).To(HaveLen(1), "one copy")
		Expect(ec2.CopyCalls.Load()).To(BeEquivalentTo(1), "the restarted operators found the copy by its tags")
	})

	It("says which right a refused copy lacks, once, and writes nothing", func() {
		copyCluster(ec2, true)
		ec2.CopyRefusal.Store("UnauthorizedOperation")
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", byFilter))).To(Succeed())
		writes := recordWrites(&machinev1beta1.MachineSetList{})
		startCopying(ec2)

		Eventually(machineSetEvents("worker-a")).Should(ContainElement(And(
			HavePrefix(bootimage.ReasonCopyNotPermitted+": "), ContainSubstring("ec2:CopyImage"), ContainSubstring(aws.CredentialsRequest))))
		list := &corev1.EventList{}
		Expect(k8s.List(ctx, list, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		for _, e := range list.Items {
			if e.Reason == bootimage.ReasonCopyNotPermitted {
				Expect(e.Type).To(Equal(corev1.EventTypeWarning))
			}
		}
		Eventually(condition("BootImageUpdateDegraded")).Should(And(HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", And(ContainSubstring("1 object(s) kept on an outdated AMI copy"), ContainSubstring("ec2:CopyImage"), ContainSubstring(aws.CredentialsRequest)))),
			"said once for the cluster, as a missing right")
		calls := ec2.CopyCalls.Load()
		Expect(writtenDuringResync(writes, getMachineSet("worker-a"), "machineset", 1)).To(BeEmpty())
		Expect(ec2.CopyCalls.Load()).To(BeNumerically("<=", calls+1), "no retry storm: a refusal is remembered")
		Expect(providerSpec("worker-a")["ami"]).To(HaveKey("filters"))
	})

	It("asks for the operator's credentials when their Secret is missing, and copies nothing", func() {
		copyCluster(ec2, false)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", byFilter))).To(Succeed())
		startCopying(ec2)
		Eventually(machineSetEvents("worker-a")).Should(ContainElement(And(
			HavePrefix(bootimage.ReasonCopyNotPermitted+": "), ContainSubstring("Secret openshift-machine-api/"+aws.CopyCredentialsSecret))))
		Expect(ec2.CopyCalls.Load()).To(BeZero())

		// The Secret appears: the copy follows without anything else changing.
		Expect(fixtures.Create(ctx, k8s, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fixtures.MachineAPINamespace, Name: aws.CopyCredentialsSecret},
			Data: map[string][]byte{"aws_access_key_id": []byte(copyKey), "aws_secret_access_key": []byte("secret")}})).To(Succeed())
		Eventually(ec2.CopyRequests).Should(HaveLen(1))
	})

	It("reports a failed copy as an Error and keeps the current image", func() {
		copyCluster(ec2, true)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("worker-a", byFilter))).To(Succeed())
		startCopying(ec2)
		Eventually(ec2.CopyRequests).Should(HaveLen(1))
		ec2.FailCopies("Client.InvalidKMSKey.InvalidState: the KMS key is disabled")
		Eventually(machineSetEvents("worker-a")).Should(ContainElement(And(HavePrefix(bootimage.ReasonCopyFailed+": "), ContainSubstring("InvalidKMSKey"))))
		Eventually(condition("BootImageUpdateDegraded")).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(providerSpec("worker-a")["ami"]).To(HaveKey("filters"))
	})

	It("keeps the ControlPlaneMachineSet on the copy too", func() {
		cpmsCluster(configv1.AWSPlatformType, modePtr(operatorv1.All), byFilter)
		reachEC2(ec2, true)
		startCopying(ec2)
		Eventually(ec2.CopyRequests).Should(HaveLen(1))
		ec2.CompleteCopies()
		Eventually(func() any { return cpmsProviderSpec()["ami"] }).Should(Equal(map[string]any{"id": ec2.CopyRequests()[0].ImageID}))
	})
})
