package bench

import (
	"context"
	"testing"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// The bare forwarder delivers what it receives: every batch and span arrives at the sink.
func TestForwarderCarriesBatches(t *testing.T) {
	sink, err := StartSink("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	f, err := StartForwarder("127.0.0.1:0", sink.Addr(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := RunLoad(context.Background(), LoadConfig{Target: f.Addr(), Protocol: "v1", Shape: otlpgen.Small, Batches: 50, InFlight: 4, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitSink(sink, 50)
	b, spans, bad := sink.Counts()
	if res.Acked != 50 || b != 50 || spans != 50*int64(otlpgen.Small.Spans) || bad != 0 {
		t.Fatalf("acked %d; sink saw %d batches, %d spans, %d unreadable; want 50, %d, 0", res.Acked, b, spans, bad, 50*otlpgen.Small.Spans)
	}
}
