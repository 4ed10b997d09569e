package controllers_test

import (
	"crypto/x509"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

var _ = Describe("The operator on an AWS STS cluster, with nothing writable", func() {
	It("assumes the role with the projected token and updates a MachineSet through EC2", func() {
		const (
			role  = "arn:aws:iam::123456789012:role/demo-x7k2p-openshift-machine-api-aws-cloud-credentials"
			token = "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.signature"
		)
		ec2 := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(ec2.Close)
		sts := fakecloud.NewSTS(role, token)
		DeferCleanup(sts.Close)
		trust := x509.NewCertPool()
		trust.AddCert(ec2.Certificate())
		trust.AddCert(sts.Certificate())

		tokenFile, err := fakecloud.PodFilesystem(GinkgoT(), token)
		Expect(err).NotTo(HaveOccurred())

		bootImageCluster(configv1.AWSPlatformType)
		infra := &configv1.Infrastructure{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)).To(Succeed())
		withEndpoints := infra.DeepCopy()
		withEndpoints.Status.PlatformStatus.AWS.ServiceEndpoints = []configv1.AWSServiceEndpoint{{Name: "ec2", URL: ec2.URL}, {Name: "sts", URL: sts.URL}}
		Expect(fixtures.SetStatus(ctx, k8s, infra, withEndpoints)).To(Succeed())
		// The cloud credential operator's Secret on an STS cluster: a shared config, no static keys.
		sharedConfig := fmt.Sprintf("[default]\nrole_arn = %s\nweb_identity_token_file = %s\n", role, tokenFile)
		Expect(fixtures.Create(ctx, k8s,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fixtures.MachineAPINamespace, Name: aws.CredentialsSecret}, Data: map[string][]byte{"credentials": []byte(sharedConfig)}},
			fixtures.MachineSet("worker-a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
		)).To(Succeed())
		mgr := startOperator(controllers.Options{CloudRootCAs: trust})
		DeferCleanup(mgr.Stop)

		Eventually(amiOf("worker-a")).Should(Equal(fixtures.NewAWSAMIUSEast1))
		Expect(sts.Calls.Load()).To(BeNumerically(">=", 1))
		Expect(ec2.Requests()).NotTo(BeEmpty())
		Expect(ec2.Requests()).To(HaveEach(And(HaveField("AccessKeyID", sts.AccessKeyID), HaveField("SessionToken", sts.SessionToken))),
			"every EC2 call signed with the role's temporary credentials")
	})
})
