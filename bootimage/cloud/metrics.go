package cloud

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count the cloud requests. They are registered by whoever embeds the operator, never at
// import time. A nil *Metrics counts nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bootimage_cloud_requests_total",
			Help: "Cloud API requests made to classify and check boot images, by API and result (success or error). An answer such as \"no such image\" is a success.",
		}, []string{"api", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bootimage_cloud_request_duration_seconds",
			Help:    "Duration of the cloud API requests made to classify and check boot images, by API, SDK retries included.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"api"}),
	}
}

// Collectors returns what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.duration}
}

// Observe records one request to api that started at start and ended with err.
func (m *Metrics) Observe(api string, start time.Time, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.requests.WithLabelValues(api, result).Inc()
	m.duration.WithLabelValues(api).Observe(time.Since(start).Seconds())
}
