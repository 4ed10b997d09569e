package cloud_test

import (
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/gcpcloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

var _ = Describe("Cloud failures", func() {
	It("are remembered for every caller for a growing interval, per region when EC2 fails, and read the same on every call", func() {
		server := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(server.Close)
		ec2 := staticKeysEC2(server)
		ec2.Backoff = cloud.Backoff{Initial: 300 * time.Millisecond, Max: time.Second}
		server.Unavailable.Store(true)

		_, first := ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
		Expect(first).To(MatchError(ContainSubstring("HTTP 503 Unavailable: The service is unavailable")))
		Expect(first.Error()).NotTo(ContainSubstring("RequestID"))
		sent := server.CallsIn("us-east-1")
		Expect(sent).To(BeNumerically(">=", 1))
		wait, ok := cloud.RetryAfter(first)
		Expect(ok).To(BeTrue())
		Expect(wait).To(BeNumerically(">", 0))

		concurrently(50, func(i int) {
			// The same query and any other query of the region get the remembered failure.
			var err error
			if i%2 == 0 {
				_, err = ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
			} else {
				_, err = ec2.MarketplaceImages(ctx, "us-east-1", fixtures.MarketplaceProduct)
			}
			if _, remembered := cloud.RetryAfter(err); !remembered {
				return // the interval passed on a slow machine: a new call, counted below
			}
			Expect(err.Error()).To(Equal(first.Error()))
		})
		Expect(server.CallsIn("us-east-1")).To(BeNumerically("<=", 2*sent), "at most one more flight while the failure is remembered")
		Expect(server.CallsIn("us-west-2")).To(BeZero())
		_, err := ec2.Image(ctx, "us-west-2", fixtures.OldAWSAMI)
		Expect(err).To(HaveOccurred())
		Expect(server.CallsIn("us-west-2")).To(BeNumerically(">=", 1), "another region is asked")

		// Once the interval passes the call is sent again: the fresh request id changes nothing.
		Eventually(func() int {
			_, _ = ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
			return server.CallsIn("us-east-1")
		}, "10s").Should(BeNumerically(">", 2*sent))
		_, again := ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
		Expect(again.Error()).To(Equal(first.Error()))
		Expect(cloud.FailureKey(again)).To(Equal(cloud.FailureKey(first)))

		server.Unavailable.Store(false)
		Eventually(func() error { _, err := ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI); return err }, "10s").Should(Succeed())
	})

	It("throttling names its code, and a different fault is a different key", func() {
		server := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(server.Close)
		ec2 := staticKeysEC2(server)
		server.Throttled.Store(true)
		_, throttled := ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
		Expect(throttled).To(MatchError(ContainSubstring("HTTP 503 RequestLimitExceeded: Request limit exceeded.")))
		server.Throttled.Store(false)
		server.Unavailable.Store(true)
		_, unavailable := staticKeysEC2(server).Image(ctx, "us-east-1", fixtures.OldAWSAMI)
		Expect(cloud.FailureKey(unavailable)).NotTo(Equal(cloud.FailureKey(throttled)))
	})

	It("GCP failures name their status and reason, and are remembered alike", func() {
		server := fakecloud.NewCompute([]fakecloud.ComputeImage{{Project: "rhcos-cloud", Name: "rhcos-1"}})
		DeferCleanup(server.Close)
		server.Unavailable.Store(true)
		compute := &gcpcloud.Images{Metrics: testMetrics, Settings: func(context.Context) (gcp.Settings, error) {
			return gcp.Settings{Version: "1", Token: "t", Endpoint: server.URL}, nil
		}}
		_, err := compute.Image(ctx, "rhcos-cloud", "rhcos-1")
		Expect(err).To(MatchError(ContainSubstring("compute:images.get: HTTP 503 backendError: Backend Error")))
		calls := server.Calls.Load()
		_, again := compute.Image(ctx, "rhcos-cloud", "rhcos-1")
		Expect(again.Error()).To(Equal(err.Error()))
		Expect(server.Calls.Load()).To(Equal(calls), "remembered, not asked again at once")
		server.Unavailable.Store(false)
		Eventually(func() error { _, err := compute.Image(ctx, "rhcos-cloud", "rhcos-1"); return err }, "10s").Should(Succeed())
	})

	It("a caller that gives up neither cancels nor fails the lookup it shares", func() {
		server := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(server.Close)
		gate := make(chan struct{})
		server.Gate = gate
		ec2 := staticKeysEC2(server)

		impatient, cancel := context.WithCancel(ctx)
		gaveUp := make(chan error, 1)
		go func() {
			_, err := ec2.Image(impatient, "us-east-1", fixtures.OldAWSAMI)
			gaveUp <- err
		}()
		Eventually(func() int { return server.CallsIn("us-east-1") }).Should(Equal(1))
		patient := make(chan error, 1)
		go func() {
			img, err := ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI)
			if err == nil && img.ImageID != fixtures.OldAWSAMI {
				err = errors.New("wrong image " + img.ImageID)
			}
			patient <- err
		}()
		cancel()
		Eventually(gaveUp).Should(Receive(MatchError(context.Canceled)))
		close(gate)
		Eventually(patient).Should(Receive(BeNil()))
		Expect(server.CallsIn("us-east-1")).To(Equal(1), "one request, shared, not cancelled")
	})
})
