package admin

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The status sampler's one sample: it gathers otlpgate's series only (the default registry).
// BenchmarkGatherEverySeries is what it cost when it gathered what /metrics serves, the Go
// runtime's and the process's collectors included.
func BenchmarkSamplerTake(b *testing.B) {
	s := newSampler(DefaultStatusConfig(), prometheus.DefaultGatherer, nil)
	b.ReportAllocs()
	for b.Loop() {
		s.take(time.Now())
	}
}

func BenchmarkGatherEverySeries(b *testing.B) {
	s := newSampler(DefaultStatusConfig(), Gatherer, nil)
	b.ReportAllocs()
	for b.Loop() {
		s.take(time.Now())
	}
}
