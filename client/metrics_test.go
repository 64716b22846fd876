package client

import (
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// scrapeQueueBytes returns otlpgate_client_queue_bytes for destination name as a scrape sees
// it, the number of series with that label, and whether the scrape succeeded.
func scrapeQueueBytes(t *testing.T, name string) (float64, int) {
	t.Helper()
	return scrapeGauge(t, "otlpgate_client_queue_bytes", name)
}

// scrapeGauge returns the client gauge metric for destination name as a scrape sees it,
// summed over its series, and the number of series with that label.
func scrapeGauge(t *testing.T, metric, name string) (float64, int) {
	t.Helper()
	return testkit.Gauge(t, metric, "destination", name)
}

// otlpgate_client_queue_bytes reads each destination's held bytes at scrape time; two live
// destinations with one name are one series holding their sum (no duplicate-series error), and
// a destination leaves the scrape when Shutdown returns.
func TestQueueBytesGaugeReadsHeld(t *testing.T) {
	cfg := testConfig(t, "127.0.0.1:1") // nothing listens: batches stay held
	a, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFeeder(t, a, b)
	f.send(0, 3, 1, 100)
	per := 0
	for _, tag := range tagList(0, 2) {
		per += len(f.body(tag))
	}
	if got := value(a.m.queueBytes); got != per {
		t.Fatalf("destination a holds %d bytes by its gauge, want %d", got, per)
	}
	if v, n := scrapeQueueBytes(t, cfg.Name); v != float64(2*per) || n != 1 {
		t.Fatalf("scrape: %d series summing %v, want 1 series of %d", n, v, 2*per)
	}
	if err := shutdown(t, a, time.Millisecond); err == nil {
		t.Fatal("a shut down without losing its held batches")
	}
	if v, n := scrapeQueueBytes(t, cfg.Name); v != float64(per) || n != 1 {
		t.Fatalf("after a's shutdown: %d series summing %v, want 1 series of %d", n, v, per)
	}
	shutdown(t, b, time.Millisecond)
	if _, n := scrapeQueueBytes(t, cfg.Name); n != 0 {
		t.Fatalf("after both shut down: %d series", n)
	}
}
