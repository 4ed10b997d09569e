package main

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// specFiles returns a function that writes a file into a directory made afresh for each spec of
// the enclosing container and returns the file's path.
func specFiles() func(name, content string) string {
	var dir string
	BeforeEach(func() { dir = GinkgoT().TempDir() })
	return func(name, content string) string {
		GinkgoHelper()
		p := filepath.Join(dir, name)
		Expect(os.WriteFile(p, []byte(content), 0o600)).To(Succeed())
		return p
	}
}

// useEC2 points the cluster's Infrastructure at the fake EC2 endpoint, and makes the CLI trust it
// the way an admin trusts a private one.
func useEC2(ctx context.Context, env *testenv.Env, ec2 *fakecloud.EC2) {
	GinkgoHelper()
	caBundle := filepath.Join(GinkgoT().TempDir(), "ec2-ca.pem")
	Expect(os.WriteFile(caBundle, ec2.CertificatePEM(), 0o600)).To(Succeed())
	GinkgoT().Setenv("SSL_CERT_FILE", caBundle)
	infra := &configv1.Infrastructure{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)).To(Succeed())
	withEndpoint := infra.DeepCopy()
	withEndpoint.Status.PlatformStatus.AWS.ServiceEndpoints = []configv1.AWSServiceEndpoint{{Name: "ec2", URL: ec2.URL}}
	Expect(fixtures.SetStatus(ctx, env.Client, infra, withEndpoint)).To(Succeed())
}
