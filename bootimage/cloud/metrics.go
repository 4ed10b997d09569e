package cloud

import "time"

// Observer counts cloud requests: the operator's metrics (internal/controllers/steps/metrics.go,
// where every metric of the operator is defined) implement it. A nil Observer counts nothing.
type Observer interface {
	// Observe records one request to api that started at start and ended with err.
	Observe(api string, start time.Time, err error)
}

// Observe records one request on o, when set.
func Observe(o Observer, api string, start time.Time, err error) {
	if o != nil {
		o.Observe(api, start, err)
	}
}
