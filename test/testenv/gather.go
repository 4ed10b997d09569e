package testenv

import "github.com/prometheus/client_golang/prometheus"

// Metric returns the value of the first series of the counter or gauge name in reg whose labels
// include labels (name, value pairs); 0 when there is none.
func Metric(reg prometheus.Gatherer, name string, labels ...string) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), nil
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), nil
			}
		}
	}
	return 0, nil
}
