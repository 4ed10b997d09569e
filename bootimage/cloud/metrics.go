package cloud

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Cloud API names, the `api` label of the request metrics.
const (
	apiDescribeImages            = "ec2:DescribeImages"
	apiImagesGet                 = "compute:images.get"
	apiAssumeRoleWithWebIdentity = "sts:AssumeRoleWithWebIdentity"
)

var (
	cloudRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bootimage_cloud_requests_total",
		Help: "Cloud API requests made to classify and check boot images, by API and result (success or error). An answer such as \"no such image\" is a success.",
	}, []string{"api", "result"})
	cloudRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "bootimage_cloud_request_duration_seconds",
		Help:    "Duration of the cloud API requests made to classify and check boot images, by API, SDK retries included.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"api"})
)

func init() {
	metrics.Registry.MustRegister(cloudRequests, cloudRequestDuration)
}

// observe records one request to api that started at start and ended with err.
func observe(api string, start time.Time, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	cloudRequests.WithLabelValues(api, result).Inc()
	cloudRequestDuration.WithLabelValues(api).Observe(time.Since(start).Seconds())
}
