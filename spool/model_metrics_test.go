package spool

import (
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// gatherSpoolMetrics reads the spool's metrics as a scrape of the default registry would, keyed
// by name and labels in the exposition form: otlpgate_spool_x{a="1",b="2"}.
func gatherSpoolMetrics() map[string]float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		panic(err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "otlpgate_spool_") {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			key := mf.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case mt.Counter != nil:
				out[key] = mt.GetCounter().GetValue()
			case mt.Gauge != nil:
				out[key] = mt.GetGauge().GetValue()
			}
		}
	}
	return out
}
