package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Counter reads the counter name from the default registry, as a scrape would: the series
// whose labels include every name=value pair of labels (given as name, value, name, value...),
// summed; 0 before the first increment.
func Counter(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	sum, _ := scrape(t, "Counter", name, labels, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
	return sum
}

// Gauge reads the gauge name from the default registry as Counter reads a counter: the sum of
// the matching series, and how many there are (0: none, as after the gauge's owner left).
func Gauge(t testing.TB, name string, labels ...string) (float64, int) {
	t.Helper()
	return scrape(t, "Gauge", name, labels, func(m *dto.Metric) float64 { return m.GetGauge().GetValue() })
}

// scrape gathers the default registry and sums value over the series of name whose labels
// include every name=value pair of labels, counting them.
func scrape(t testing.TB, fn, name string, labels []string, value func(*dto.Metric) float64) (float64, int) {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("testkit.%s(%q): labels must come in name, value pairs", fn, name)
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, n := 0.0, 0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
						break
					}
				}
				if !found {
					continue series
				}
			}
			sum += value(m)
			n++
		}
	}
	return sum, n
}
