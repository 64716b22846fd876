package bench

import (
	"context"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// The load generator against the sink, both protocols: every batch is answered, every span
// counted, and every batch carries a stamp the sink turns into a latency.
func TestLoadIntoSink(t *testing.T) {
	s, err := StartSink("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, proto := range []string{"v1", "otep"} {
		s.Reset()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := RunLoad(ctx, LoadConfig{Target: s.Addr(), Protocol: proto, Shape: otlpgen.Shape{Spans: 7, Attrs: 3},
			Batches: 300, InFlight: 4, Seed: 1})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		if res.Sent != 300 || res.Acked != 300 || res.Failed != 0 {
			t.Fatalf("%s: %+v", proto, res)
		}
		batches, spans, bad := s.Counts()
		if batches != 300 || spans != 300*7 || bad != 0 {
			t.Fatalf("%s: sink counted %d batches, %d spans, %d bad", proto, batches, spans, bad)
		}
		if lat := s.Latencies(); len(lat) != 300 || lat[0] < 0 || Percentile(lat, 0.99) > time.Minute {
			t.Fatalf("%s: %d latencies, min %v", proto, len(lat), lat[0])
		}
	}
}

func TestOTEPWithID(t *testing.T) {
	tmpl := []byte{0x08, 0x01, 0x12, 0x00}
	for _, c := range []struct {
		id   uint64
		want []byte
	}{{1, []byte{0x08, 0x01, 0x12, 0x00}}, {300, []byte{0x08, 0xac, 0x02, 0x12, 0x00}}} {
		if got := otepWithID(nil, tmpl, c.id); string(got) != string(c.want) {
			t.Errorf("id %d: % x, want % x", c.id, got, c.want)
		}
	}
}
