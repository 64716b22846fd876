package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter reads the counter name from the default registry, as a scrape would: the series
// whose labels include every name=value pair of labels (given as name, value, name, value...),
// summed; 0 before the first increment.
func Counter(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("testkit.Counter(%q): labels must come in name, value pairs", name)
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
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
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
