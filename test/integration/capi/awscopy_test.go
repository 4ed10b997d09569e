package capi_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// installer#10877: in a region the stream lacks, the installer leaves the Cluster API worker
// templates without ami.id. The operator copies the stream's us-east-1 AMI there and points a new
// template copy at it.
var _ = Describe("Cluster API templates in a region the stream lacks", func() {
	It("copies the rhel-10 stream's us-east-1 AMI into the region and gives the template copy its id", func() {
		ec2 := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(ec2.Close)
		own := testenv.StartForSpecs(testenv.Options{CAPI: true})
		c := own.Client
		Expect(fixtures.Create(ctx, c, append(fixtures.ClusterAPIOnAWS(fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All)),
			fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.OCP50ReleaseVersion),
			fixtures.OSImageStream("rhel-10"), fixtures.Pool("worker", ""))...)).To(Succeed())
		infra := &configv1.Infrastructure{}
		Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)).To(Succeed())
		inRegion := infra.DeepCopy()
		inRegion.Status.PlatformStatus.AWS.Region = "eu-west-1"
		inRegion.Status.PlatformStatus.AWS.ServiceEndpoints = []configv1.AWSServiceEndpoint{{Name: "ec2", URL: ec2.URL}}
		Expect(fixtures.SetStatus(ctx, c, infra, inRegion)).To(Succeed())
		for name, key := range map[string]string{aws.CredentialsSecret: "AKIAMACHINEAPI000001", aws.CopyCredentialsSecret: "AKIABOOTIMAGEOP00001"} {
			Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fixtures.MachineAPINamespace, Name: name},
				Data: map[string][]byte{"aws_access_key_id": []byte(key), "aws_secret_access_key": []byte("secret")}})).To(Succeed())
		}
		Expect(c.Create(ctx, fixtures.AWSMachineTemplate("rhel10-0", ""))).To(Succeed())
		owner := fixtures.ClusterAPIOwner("MachineSet", "rhel10", "rhel10-0")
		owner.SetLabels(map[string]string{bootimage.OSStreamLabel: "rhel-10"})
		Expect(c.Create(ctx, owner)).To(Succeed())
		mgr, err := own.StartOperatorWithHooks(seams.Hooks{CRDPollInterval: 100 * time.Millisecond, CopyPoll: 100 * time.Millisecond},
			controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, CloudRootCAs: ec2.RootCAs()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mgr.Stop)

		Eventually(ec2.CopyRequests).Should(ConsistOf(And(
			HaveField("Region", "eu-west-1"), HaveField("SourceImageID", fixtures.RHEL10AWSAMIUSEast1), HaveField("SourceRegion", "us-east-1"))))
		Expect(ec2.CopyRequests()[0].Tags["image"]).To(HaveKeyWithValue(aws.TagOSStream, "rhel-10"))
		current := func() any {
			got := owner.DeepCopy()
			Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
			ref := fmt.Sprint(field(got.Object, "spec", "template", "spec", "infrastructureRef", "name"))
			if ref == "rhel10-0" {
				return "not copied"
			}
			t := template(ref)
			Expect(c.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			return field(t.Object, "spec", "template", "spec", "ami", "id")
		}
		Expect(current()).To(Equal("not copied"), "nothing is written while the copy is pending")
		ec2.CompleteCopies()
		Eventually(current).Should(Equal(ec2.CopyRequests()[0].ImageID))
		Expect(ec2.CopyCalls.Load()).To(BeEquivalentTo(1))
	})
})
