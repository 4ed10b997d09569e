package cloud_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/gcpcloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// requests counts cloud requests by API and result, as the operator's metrics do.
type requests struct {
	mu     sync.Mutex
	counts map[[2]string]float64
}

func (r *requests) Observe(api string, _ time.Time, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[[2]string{api, result}]++
}

// testMetrics count the requests of every adapter these tests build.
var testMetrics = &requests{counts: map[[2]string]float64{}}

// requestCount is how many requests to api ended with result ("success" or "error").
func requestCount(api, result string) float64 {
	testMetrics.mu.Lock()
	defer testMetrics.mu.Unlock()
	return testMetrics.counts[[2]string{api, result}]
}

// concurrently runs f from n goroutines at once and waits for them.
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			defer GinkgoRecover()
			f(i)
		})
	}
	wg.Wait()
}

var _ = Describe("Cloud lookups shared by every MachineSet", func() {
	It("sends one DescribeImages per marketplace product and region, however many ask at once", func() {
		server := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(server.Close)
		ec2 := staticKeysEC2(server)
		before := requestCount("ec2:DescribeImages", "success")

		concurrently(50, func(i int) {
			region := []string{"us-east-1", "us-west-2"}[i%2]
			_, err := ec2.MarketplaceImages(ctx, region, fixtures.MarketplaceProduct)
			Expect(err).NotTo(HaveOccurred())
			_, err = ec2.Image(ctx, region, fixtures.OldAWSAMI)
			Expect(err).NotTo(HaveOccurred())
		})

		Expect(server.Requests()).To(ConsistOf(
			And(HaveField("Region", "us-east-1"), HaveField("Owners", []string{"aws-marketplace"}), HaveField("NameFilters", []string{"*" + fixtures.MarketplaceProduct + "*"})),
			And(HaveField("Region", "us-west-2"), HaveField("Owners", []string{"aws-marketplace"})),
			And(HaveField("Region", "us-east-1"), HaveField("ImageIDs", []string{fixtures.OldAWSAMI})),
			And(HaveField("Region", "us-west-2"), HaveField("ImageIDs", []string{fixtures.OldAWSAMI})),
		))
		Expect(requestCount("ec2:DescribeImages", "success") - before).To(BeEquivalentTo(4))
	})

	It("sends one images.get per image, and never closes a GCP client under a request when the credentials rotate", func() {
		var images []fakecloud.ComputeImage
		for i := range 10 {
			images = append(images, fakecloud.ComputeImage{Project: "rhcos-cloud", Name: fmt.Sprintf("rhcos-%d", i)})
		}
		server := fakecloud.NewCompute(images)
		DeferCleanup(server.Close)
		var mu sync.Mutex
		version := 0
		compute := &gcpcloud.Images{Metrics: testMetrics, Settings: func(context.Context) (gcp.Settings, error) {
			mu.Lock()
			defer mu.Unlock()
			return gcp.Settings{Version: fmt.Sprint(version), Token: "t", Endpoint: server.URL}, nil
		}}

		concurrently(50, func(i int) {
			img, err := compute.Image(ctx, "rhcos-cloud", images[i%10].Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(img).To(Equal(&gcp.Image{Name: images[i%10].Name}))
		})
		Expect(server.Calls.Load()).To(BeEquivalentTo(10))

		concurrently(50, func(i int) {
			if i%10 == 0 {
				mu.Lock()
				version++ // a rotated Secret: a new client, the old one closed once idle
				mu.Unlock()
			}
			_, err := compute.Image(ctx, "rhcos-cloud", images[i%10].Name)
			Expect(err).NotTo(HaveOccurred())
		})
	})
})
