package admin

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// newScaleRig is a registry holding, for each of n destinations, the series a real destination
// registers that the status reads (the reasons, the latency buckets), with no traffic.
func newScaleRig(n int) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	dl := []string{"destination", "backend"}
	counter := func(name string, extra ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name}, append(dl, extra...))
		reg.MustRegister(v)
		return v
	}
	gauge := func(name string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name}, dl)
		reg.MustRegister(v)
		return v
	}
	ackedReqs, ackedItems, sent, throttles := counter("otlpgate_client_acknowledged_requests_total"),
		counter("otlpgate_client_acknowledged_items_total"), counter("otlpgate_client_sent_requests_total"), counter("otlpgate_client_throttles_total")
	dropped, retried := counter("otlpgate_client_dropped_items_total", "reason"), counter("otlpgate_client_retried_requests_total", "reason")
	queue, inFlight := gauge("otlpgate_client_queue_bytes"), gauge("otlpgate_client_in_flight_requests")
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "otlpgate_client_ack_latency_seconds",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, dl)
	reg.MustRegister(latency)
	for i := range n {
		d := fmt.Sprintf("d%d", i)
		for _, c := range []*prometheus.CounterVec{ackedReqs, ackedItems, sent, throttles} {
			c.WithLabelValues(d, "")
		}
		for _, r := range []string{"rejected", "retry_exhausted", "ack_timeout", "queue_full", "shutdown_queued", "shutdown_pending",
			"too_large", "expired", "handover", "removed"} {
			dropped.WithLabelValues(d, "", r)
		}
		for _, r := range []string{"failed_retryable", "transport", "throttled"} {
			retried.WithLabelValues(d, "", r)
		}
		queue.WithLabelValues(d, "")
		inFlight.WithLabelValues(d, "")
		latency.WithLabelValues(d, "")
	}
	return reg
}

// The status sampler's sample and a status document at 10, 100 and 1,000 idle destinations,
// each with the series a real destination has. Reported, not asserted: the assertion that the
// cost is linear is TestSamplerWorkIsLinear, which counts series instead of timing them.
func BenchmarkSamplerDestinations(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		reg := newScaleRig(n)
		b.Run(fmt.Sprintf("take/%d", n), func(b *testing.B) {
			s := newSampler(DefaultStatusConfig(), reg, nil)
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(2 * time.Second)
				s.take(now)
			}
		})
		b.Run(fmt.Sprintf("status/%d", n), func(b *testing.B) {
			s := newSampler(DefaultStatusConfig(), reg, nil)
			now := time.Now()
			for range 40 {
				now = now.Add(2 * time.Second)
				s.take(now)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.status(now)
			}
		})
	}
}

// The work of a sample and of a status document grows linearly with the destinations: the
// series the sampler looks at are counted at 10, 100 and 1,000 destinations, and going from 100
// to 1,000 costs exactly ten times what going from 10 to 100 does. Summing each destination's
// series by scanning every series (what kept a core busy at 1,000 destinations) is quadratic.
func TestSamplerWorkIsLinear(t *testing.T) {
	visits := map[int]int64{}
	for _, n := range []int{10, 100, 1000} {
		s := newSampler(DefaultStatusConfig(), newScaleRig(n), nil)
		t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		for i := range 3 {
			s.take(t0.Add(time.Duration(i) * 2 * time.Second))
		}
		before := seriesVisits.Load()
		now := t0.Add(6 * time.Second)
		s.take(now)
		st := s.status(now)
		visits[n] = seriesVisits.Load() - before
		if len(st.Destinations) != n {
			t.Fatalf("%d destinations: status shows %d", n, len(st.Destinations))
		}
	}
	small, large := visits[100]-visits[10], visits[1000]-visits[100]
	if small <= 0 || large != 10*small {
		t.Fatalf("series visited per sample and status: %v; from 100 to 1,000 destinations %d more, want 10 × %d = %d (linear)",
			visits, large, small, 10*small)
	}
}

// stuckGatherer blocks every Gather until release is closed, like a sample of a registry too
// large for the CPU it gets.
type stuckGatherer struct {
	entered chan struct{}
	release chan struct{}
}

func (g *stuckGatherer) Gather() ([]*dto.MetricFamily, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return nil, nil
}

// Shutdown returns when its context ends even while a sample is still being taken: the
// sampler must not hold the process past -shutdown.timeout.
func TestShutdownDoesNotWaitForSlowSample(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	s, err := New(cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &stuckGatherer{entered: make(chan struct{}, 1), release: make(chan struct{})}
	s.sampler.g = g
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	<-g.entered // the first sample is being taken, and does not end
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	returned := make(chan error, 1)
	go func() { returned <- s.Shutdown(ctx) }()
	select {
	case err := <-returned:
		if err == nil {
			t.Error("Shutdown returned nil while the sample was still running: want the context's error")
		}
	case <-time.After(time.Minute):
		close(g.release)
		<-returned
		t.Fatal("Shutdown still waiting for the sample a minute after its deadline")
	}
	close(g.release)
	<-s.sampleDone // the sample's goroutine ends once the gather returns
}

// Samples older than a minute keep only the charts' series: the charts still cover the whole
// window with the exact values, and the rates and latencies, read from the last minute, are
// those of whole samples.
func TestStatusHistoryAcrossThinnedSamples(t *testing.T) {
	r := newStatusRig()
	cfg := StatusConfig{Interval: time.Second, Window: 3 * time.Minute, DownAfter: 10 * time.Second}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := newSampler(cfg, r.reg, nil)
	s.start = t0
	const n = 200
	for i := range n {
		r.ackedItems.WithLabelValues("a", "").Add(float64(100 * (i%3 + 1))) // 100, 200, 300, ...
		r.acked.WithLabelValues("a", "").Inc()
		r.grpcItems.WithLabelValues("v1", "traces").Add(50)
		r.latency.WithLabelValues("a", "").Observe(0.005)
		s.take(t0.Add(time.Duration(i) * time.Second))
	}
	now := t0.Add((n - 1) * time.Second)
	s.mu.Lock()
	whole, thin := 0, 0
	for _, sm := range s.mu.ring {
		if sm.set.thinned {
			thin++
		} else {
			whole++
		}
	}
	s.mu.Unlock()
	if whole != 61 || thin != 120 {
		t.Errorf("ring holds %d whole and %d thin samples, want 61 (the last minute and the sample a minute old) and 120", whole, thin)
	}
	st := s.status(now)
	a := findDest(t, st, "a")
	if len(a.History) != 180 {
		t.Fatalf("history holds %d values, want 180", len(a.History))
	}
	for i, v := range a.History {
		// History value i is the increase from sample n-181+i to the next one.
		if want := float64(100 * ((n-180+i)%3 + 1)); v != want {
			t.Fatalf("history[%d] = %v, want %v", i, v, want)
		}
	}
	if a.ItemsPerSec != 200 || a.LatencyP50 < 0.001 || a.LatencyP50 > 0.01 {
		t.Errorf("rate %v, p50 %v: want 200 and within the 1-10 ms bucket", a.ItemsPerSec, a.LatencyP50)
	}
	if len(st.Intakes) != 1 || st.Intakes[0].ItemsPerSec != 50 || len(st.Intakes[0].History) != 180 || st.Intakes[0].History[0] != 50 {
		t.Errorf("intakes: %+v", st.Intakes)
	}
}
