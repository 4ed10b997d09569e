package controllers_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// awsClusterAt seeds a stable AWS cluster whose Infrastructure names server as its ec2 endpoint,
// with static credentials in openshift-machine-api/aws-cloud-credentials.
func awsClusterAt(server *fakecloud.EC2) {
	GinkgoHelper()
	bootImageCluster(configv1.AWSPlatformType)
	infra := &configv1.Infrastructure{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)).To(Succeed())
	withEndpoint := infra.DeepCopy()
	withEndpoint.Status.PlatformStatus.AWS.ServiceEndpoints = []configv1.AWSServiceEndpoint{{Name: "ec2", URL: server.URL}}
	Expect(fixtures.SetStatus(ctx, k8s, infra, withEndpoint)).To(Succeed())
	Expect(fixtures.Create(ctx, k8s, fixtures.AWSCredentialsSecret())).To(Succeed())
}

var _ = Describe("AWS Marketplace MachineSets through EC2", func() {
	It("follows each MachineSet's product with one DescribeImages per product and region, for 50 MachineSets", func() {
		products := []string{"59ead7de-2540-4653-a8b0-fa7926d5c845", "963b36c3-de6f-48ed-b802-2b38b2a2cdeb"} // OCP, OKE x86_64
		regions := []string{"us-east-1", "us-west-2"}
		ami := func(kind, product, region string) string {
			return fmt.Sprintf("ami-%s-%s-%s", kind, product[:8], region)
		}
		var amis []aws.Image
		for _, product := range products {
			for _, region := range regions {
				marketplace := func(kind, release, created string) aws.Image {
					return aws.Image{
						ImageID: ami(kind, product, region), OwnerID: aws.MarketplaceOwner, Region: region, State: "available", CreationDate: created,
						Name:        fmt.Sprintf("RHEL-9.4-RHCOS-%s_HVM_GA-%s-x86_64-0-%s", release[:3], created[:10], product),
						Description: fmt.Sprintf("RHEL CoreOS %s %s x86_64", release[:3], release),
					}
				}
				amis = append(amis,
					marketplace("old", "9.4.20250101-0", "2025-01-01T00:00:00.000Z"),
					marketplace("new", "9.6.20250601-0", "2025-06-01T00:00:00.000Z"),
					marketplace("newer", "9.7.20251101-0", "2025-11-01T00:00:00.000Z"))
			}
		}
		server := fakecloud.NewEC2(amis)
		DeferCleanup(server.Close)
		awsClusterAt(server)
		want := map[string]string{}
		for i := range 50 {
			product, region := products[i%2], regions[i/2%2]
			name := fmt.Sprintf("worker-%02d", i)
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet(name, fixtures.AWSProviderSpec(region, ami("old", product, region))))).To(Succeed())
			want[name] = ami("new", product, region)
		}

		mgr := startOperator(controllers.Options{CloudRootCAs: server.RootCAs()})
		DeferCleanup(mgr.Stop)

		Eventually(func() map[string]string {
			got := map[string]string{}
			for name := range want {
				got[name], _ = amiOf(name)().(string)
			}
			return got
		}).Should(Equal(want))
		listings := map[string]int{}
		for _, r := range server.Requests() {
			if len(r.Owners) > 0 {
				Expect(r.Owners).To(Equal([]string{"aws-marketplace"}))
				listings[fmt.Sprintf("%s %v", r.Region, r.NameFilters)]++
			}
		}
		Expect(listings).To(Equal(map[string]int{
			"us-east-1 [*" + products[0] + "*]": 1, "us-west-2 [*" + products[0] + "*]": 1,
			"us-east-1 [*" + products[1] + "*]": 1, "us-west-2 [*" + products[1] + "*]": 1,
		}))
		Eventually(machineSetEvents("worker-00")).Should(ContainElement(ContainSubstring(want["worker-00"])))
	})
})
