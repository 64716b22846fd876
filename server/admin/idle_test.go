package admin

import (
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// lastValue is the newest sample's value of name, summed over its series.
func lastValue(sm *sampler, name string) float64 {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.mu.ring[len(sm.mu.ring)-1].sum(name)
}

// countingSampler is a sampler of cfg over a registry of one counter, admitted, that counts
// its gathers.
func countingSampler(cfg StatusConfig) (sm *sampler, admitted prometheus.Counter, gathers *atomic.Int64) {
	reg := prometheus.NewRegistry()
	admitted = prometheus.NewCounter(prometheus.CounterOpts{Name: "otlpgate_fastpath_admitted_items_total", Help: "items"})
	reg.MustRegister(admitted)
	gathers = new(atomic.Int64)
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { gathers.Add(1); return reg.Gather() })
	return newSampler(cfg, g, nil), admitted, gathers
}

// An idle process's sampler gathers the metrics ever less often, at least once in
// idleGatherMax, and sleeps in between, while keeping one sample per interval for the charts
// (filled in by the next gather or view); a change is seen within idleGatherMax, and a view of
// the status gathers at once.
func TestSamplerIdleGathersLess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultStatusConfig()
		sm, admitted, gathers := countingSampler(cfg)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { runSampler(sm, stop); close(done) }()
		defer func() { close(stop); <-done }()

		time.Sleep(cfg.Window + time.Millisecond)
		synctest.Wait()
		// Every interval: 301 gathers. Backing off: 1+1+1+2+4+8+16 in the first minute, then
		// one every 30 s.
		if n := gathers.Load(); n > 30 {
			t.Errorf("%d gathers in %v of idle, want at most 30", n, cfg.Window)
		}
		// Woken only to gather: not every interval to repeat the last sample.
		if n, g := sm.wakes.Load(), gathers.Load(); n != g-1 {
			t.Errorf("the sampler woke %d times in %v of idle for %d gathers after the first, want one wake a gather", n, cfg.Window, g-1)
		}
		// A view fills the intervals slept through: one sample per interval over the window.
		(&Server{sampler: sm}).refresh(time.Now())
		sm.mu.Lock()
		samples := len(sm.mu.ring)
		sm.mu.Unlock()
		if want := int(cfg.Window/cfg.Interval) + 1; samples != want {
			t.Errorf("%d samples over the window, want one per interval: %d", samples, want)
		}
		if h := sm.status(time.Now()).Queue.AdmittedHistory; len(h) != int(cfg.Window/cfg.Interval) {
			t.Errorf("%d points in the chart of the window, want %d", len(h), cfg.Window/cfg.Interval)
		}
		time.Sleep(cfg.Window) // let the view's return to every interval back off again
		synctest.Wait()

		admitted.Add(5)
		time.Sleep(idleGatherMax + time.Millisecond)
		synctest.Wait()
		if v := lastValue(sm, "otlpgate_fastpath_admitted_items_total"); v != 5 {
			t.Errorf("admitted %v in the newest sample %v after the change, want 5", v, idleGatherMax)
		}

		time.Sleep(cfg.Window)
		synctest.Wait()
		admitted.Add(7)
		before := gathers.Load()
		(&Server{sampler: sm}).refresh(time.Now())
		if v := lastValue(sm, "otlpgate_fastpath_admitted_items_total"); v != 12 || gathers.Load() != before+1 {
			t.Errorf("a view after idle: admitted %v in the newest sample, %d gathers; want 12 at once, by one gather", v, gathers.Load()-before)
		}
		// While someone looks (the page asks every interval), the status is gathered every
		// interval.
		before = gathers.Load()
		for range 5 {
			time.Sleep(cfg.Interval)
			synctest.Wait()
			(&Server{sampler: sm}).refresh(time.Now())
		}
		if d := gathers.Load() - before; d < 5 {
			t.Errorf("%d gathers over 5 intervals of views, want at least 5", d)
		}
	})
}

func TestIdleSkip(t *testing.T) {
	cfg := DefaultStatusConfig()
	var got []int
	for q := range 8 {
		got = append(got, idleSkip(q, cfg))
	}
	want := []int{0, 0, 1, 3, 7, 14, 14, 14}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("idleSkip(0..7) = %v, want %v", got, want)
		}
	}
}

// A gather after a long silence (a process stopped for an hour) fills only the window with
// the last sample, one per interval, and the chart shows no traffic over it.
func TestSamplerFillsOnlyTheWindow(t *testing.T) {
	reg := prometheus.NewRegistry()
	admitted := prometheus.NewCounter(prometheus.CounterOpts{Name: "otlpgate_fastpath_admitted_items_total", Help: "items"})
	reg.MustRegister(admitted)
	cfg := DefaultStatusConfig()
	sm := newSampler(cfg, reg, nil)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	admitted.Add(3)
	sm.take(t0)
	sm.take(t0.Add(time.Hour))
	sm.mu.Lock()
	ring := slices.Clone(sm.mu.ring)
	sm.mu.Unlock()
	if want := int(cfg.Window/cfg.Interval) + 1; len(ring) != want {
		t.Fatalf("%d samples after an hour's gap, want one per interval of the window: %d", len(ring), want)
	}
	for i := 1; i < len(ring); i++ {
		if d := ring[i].at.Sub(ring[i-1].at); d != cfg.Interval {
			t.Fatalf("samples %d and %d are %v apart, want %v", i-1, i, d, cfg.Interval)
		}
	}
	if got := ring[len(ring)-1].at; !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("newest sample at %v, want the gather's time %v", got, t0.Add(time.Hour))
	}
	if got := ring[0].sum("otlpgate_fastpath_admitted_items_total"); got != 3 {
		t.Errorf("the oldest filled sample holds %v admitted, want the last gathered value 3", got)
	}
}

// Under steady traffic that no one views, the sampler gathers every -status.unviewed-interval,
// not every -status.interval, and the chart still has a point per interval, each the steady
// rate: the points between two gathers lie on the line between them, not flat then a spike.
// A view brings it back to every interval.
func TestSamplerUnviewedGathersLess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultStatusConfig()
		sm, admitted, gathers := countingSampler(cfg)
		stop, done, fed := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() { runSampler(sm, stop); close(done) }()
		// One item every 500 ms, a quarter of a period off the gathers: 2 items a second.
		go func() {
			defer close(fed)
			time.Sleep(250 * time.Millisecond)
			for range 2 * 150 {
				admitted.Inc()
				time.Sleep(500 * time.Millisecond)
			}
		}()
		defer func() { close(stop); <-done; <-fed }()

		const span = 2 * time.Minute
		time.Sleep(span)
		synctest.Wait()
		if n, most := gathers.Load(), int64(span/cfg.Unviewed)+1; n > most {
			t.Errorf("%d gathers in %v of traffic no one viewed, want at most %d (one per %v)", n, span, most, cfg.Unviewed)
		}
		sm.mu.Lock()
		ring := slices.Clone(sm.mu.ring)
		sm.mu.Unlock()
		if want := int(span/cfg.Interval) - int(cfg.Unviewed/cfg.Interval) + 1; len(ring) < want {
			t.Errorf("%d samples in %v, want a point per interval up to the last gather: %d", len(ring), span, want)
		}
		for i := 1; i < len(ring); i++ {
			if d := ring[i].at.Sub(ring[i-1].at); d != cfg.Interval {
				t.Fatalf("samples %d and %d are %v apart, want %v", i-1, i, d, cfg.Interval)
			}
		}
		h := history(ring, func(x *sample) float64 { return x.sum("otlpgate_fastpath_admitted_items_total") })
		for i, v := range h {
			if v != 2 {
				t.Fatalf("chart point %d of %v: %v items/s, want the steady 2", i, h, v)
			}
		}
		// Viewed (the page asks every interval): every interval again.
		before := gathers.Load()
		for range 5 {
			(&Server{sampler: sm}).refresh(time.Now())
			time.Sleep(cfg.Interval)
			synctest.Wait()
		}
		if d := gathers.Load() - before; d < 5 {
			t.Errorf("%d gathers over 5 intervals of views, want at least 5", d)
		}
	})
}

// -status.unviewed-interval is held between -status.interval and half of -status.down-after.
func TestUnviewedIntervalHeld(t *testing.T) {
	for _, c := range []struct {
		cfg  StatusConfig
		want time.Duration
	}{
		{DefaultStatusConfig(), 10 * time.Second},
		{StatusConfig{Interval: 30 * time.Second, Unviewed: 10 * time.Second, DownAfter: 5 * time.Minute}, 30 * time.Second},
		{StatusConfig{Interval: 250 * time.Millisecond, Unviewed: 10 * time.Second, DownAfter: 2 * time.Second}, time.Second},
		{StatusConfig{Interval: 2 * time.Second, Unviewed: 0, DownAfter: time.Minute}, 2 * time.Second},
	} {
		if got := c.cfg.unviewed(); got != c.want {
			t.Errorf("%+v: sampled every %v unviewed, want %v", c.cfg, got, c.want)
		}
	}
}
