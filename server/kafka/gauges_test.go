package kafka

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// gaugeValue reads a gauge of the default registry.
func gaugeValue(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// The connection gauge reads the servers' own connection sets at scrape time: it follows
// connections as they open and close, and a server leaves it at Shutdown.
func TestConnectionGaugeReadsServers(t *testing.T) {
	s, _ := startServer(t, testConfig(), &testkit.Recorder{})
	before := gaugeValue(t, "otlpgate_kafka_connections")
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gaugeValue(t, "otlpgate_kafka_connections") != before+1 {
		if time.Now().After(deadline) {
			t.Fatalf("gauge %v, want %v", gaugeValue(t, "otlpgate_kafka_connections"), before+1)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.Close()
	for gaugeValue(t, "otlpgate_kafka_connections") != before {
		if time.Now().After(deadline) {
			t.Fatalf("gauge %v after close, want %v", gaugeValue(t, "otlpgate_kafka_connections"), before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Shutdown(context.Background())
	if _, live := liveServers.Load(s); live {
		t.Fatal("a shut down server still counts in the gauges")
	}
}
