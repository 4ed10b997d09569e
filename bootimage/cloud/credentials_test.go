package cloud_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

const (
	roleARN = "arn:aws:iam::123456789012:role/demo-x7k2p-openshift-machine-api-aws-cloud-credentials"
	saToken = "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.signature"
)

var _ = Describe("AWS credentials on a read-only root filesystem", func() {
	var ec2Server *fakecloud.EC2
	var stsServer *fakecloud.STS
	var tokenFile string
	var trust *x509.CertPool

	BeforeEach(func() {
		ec2Server = fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(ec2Server.Close)
		stsServer = fakecloud.NewSTS(roleARN, saToken)
		DeferCleanup(stsServer.Close)
		trust = x509.NewCertPool()
		trust.AddCert(ec2Server.Certificate())
		trust.AddCert(stsServer.Certificate())

		var err error
		tokenFile, err = fakecloud.PodFilesystem(GinkgoT(), saToken)
		Expect(err).NotTo(HaveOccurred())
	})

	catalogue := func(sharedConfig string) *awscloud.EC2 {
		return &awscloud.EC2{Metrics: testMetrics, RootCAs: trust, Settings: func(context.Context) (awscloud.Settings, error) {
			return awscloud.Settings{Version: "1", SharedConfig: []byte(sharedConfig), Endpoint: ec2Server.URL, STSEndpoint: stsServer.URL}, nil
		}}
	}

	It("assumes the role with the projected token at STS, then calls EC2 with the temporary credentials", func() {
		ec2 := catalogue(fmt.Sprintf("[default]\nrole_arn = %s\nweb_identity_token_file = %s\n", roleARN, tokenFile))

		for _, id := range []string{fixtures.OldAWSAMI, fixtures.NewAWSAMIUSEast1} {
			img, err := ec2.Image(ctx, "us-east-1", id)
			Expect(err).NotTo(HaveOccurred())
			Expect(img.ImageID).To(Equal(id))
		}

		Expect(stsServer.Calls.Load()).To(BeEquivalentTo(1), "the credentials are cached until they expire")
		Expect(ec2Server.Requests()).To(HaveEach(And(
			HaveField("AccessKeyID", stsServer.AccessKeyID),
			HaveField("SessionToken", stsServer.SessionToken),
		)))
		Expect(requestCount("sts:AssumeRoleWithWebIdentity", "success")).To(BeNumerically(">=", 1))
	})

	It("says why STS refused the token", func() {
		Expect(os.WriteFile(tokenFile, []byte("an expired token"), 0o600)).To(Succeed())
		ec2 := catalogue(fmt.Sprintf("[default]\nrole_arn = %s\nweb_identity_token_file = %s\n", roleARN, tokenFile))
		_, err := ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
		Expect(err).To(MatchError(ContainSubstring("InvalidIdentityToken")))
		Expect(ec2Server.Requests()).To(BeEmpty())
		Expect(requestCount("sts:AssumeRoleWithWebIdentity", "error")).To(BeNumerically(">=", 1))
	})

	It("reads static keys from the shared config", func() {
		ec2 := catalogue("# written by the cloud credential operator\n[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
		_, err := ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
		Expect(err).NotTo(HaveOccurred())
		Expect(ec2Server.Requests()).To(ConsistOf(HaveField("AccessKeyID", "AKIAIOSFODNN7EXAMPLE")))
		Expect(stsServer.Calls.Load()).To(BeZero())
	})

	DescribeTable("refuses credentials it cannot use, naming what is missing",
		func(sharedConfig, message string) {
			_, err := catalogue(sharedConfig).Image(ctx, "us-east-1", fixtures.OldAWSAMI)
			Expect(err).To(MatchError(ContainSubstring(message)))
			Expect(ec2Server.Requests()).To(BeEmpty())
		},
		Entry("a role without a token file", "[default]\nrole_arn = "+roleARN+"\n", "role_arn and web_identity_token_file must both be set"),
		Entry("no default profile", "[profile other]\naws_access_key_id = AKID\n", "no [default] profile"),
		Entry("a line that is not key = value", "[default]\nrole_arn\n", "line 2: not key = value"),
		Entry("nothing usable", "[default]\nregion = us-east-1\n", "neither static keys"),
	)
})
