package cloud_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp/gcpcloud"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// testMetrics count the requests of every adapter these tests build.
var testMetrics = cloud.NewMetrics()

// requestCount reads bootimage_cloud_requests_total{api, result} of testMetrics.
func requestCount(api, result string) float64 {
	GinkgoHelper()
	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(testMetrics.Collectors()...)
	families, err := registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "bootimage_cloud_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "api") == api && label(m, "result") == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
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
