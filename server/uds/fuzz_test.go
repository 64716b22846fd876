package uds

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// tracePayloads returns the TRACE_EXPORT payloads of the captures.
func tracePayloads(t testing.TB) [][]byte {
	var out [][]byte
	for _, name := range captures {
		s := ocdaemon.NewSplitter(4 << 20)
		s.Feed(readFile(t, name+".bin"))
		var f ocdaemon.Frame
		for s.Next(&f) {
			if f.Type == ocdaemon.TraceExport {
				out = append(out, append([]byte(nil), f.Payload...))
			}
		}
		s.Close()
	}
	return out
}

// FuzzSpanConverter checks that the converter never panics, accepts only valid JSON, and that
// whatever it produces marshals into a request the protobuf runtime accepts.
func FuzzSpanConverter(f *testing.F) {
	for _, p := range tracePayloads(f) {
		f.Add(p)
	}
	f.Add([]byte(`[` + with("timeEvents", `[{"time":1.5,"description":"d"},{"time":2,"type":"SENT","id":3}]`) + `]`))
	f.Add([]byte(`[` + with("links", `[{"traceId":"1","spanId":"2","attributes":{"a":[1,{"b":null}]}}]`) + `]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var c spanConverter
		err := c.convert(in, 3)
		if err != nil {
			if len(c.spans) != 0 {
				t.Fatal("spans kept from a rejected export")
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
			ScopeSpans: []*tracev1.ScopeSpans{{Spans: otlpSpans(&c)}},
		}}}
		b, err := req.MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		render(t, []testkit.Received{{Signal: fastpath.Traces, Body: b, Items: len(c.spans)}})
		checkWire(t, &c)
		for _, sp := range otlpSpans(&c) {
			if len(sp.TraceId) != 16 || len(sp.SpanId) != 8 || (sp.ParentSpanId != nil && len(sp.ParentSpanId) != 8) {
				t.Fatalf("bad id widths %x %x %x", sp.TraceId, sp.SpanId, sp.ParentSpanId)
			}
		}
	})
}

// FuzzFeed drives a connection's handler with arbitrary bytes, in two writes, without a socket:
// the frame decoder, every payload decoder, the stats registry and the span converter must
// survive anything.
func FuzzFeed(f *testing.F) {
	// Small seeds: the fuzzer minimises every new input it finds, and that costs time in
	// proportion to the input's size.
	for _, name := range []string{"stats_basic", "trace_minimal"} {
		data := readFile(f, name+".bin")
		f.Add(data, uint16(len(data)/2))
	}
	s := newStream(3).init().measure("m", ocdaemon.MeasureFloat).
		view("d", "m", ocdaemon.AggregationDistribution, "k").view("l", "m", ocdaemon.AggregationLastValue)
	f.Add(s.buf, uint16(10))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		cfg := DefaultConfig()
		cfg.MaxSeries = 4
		rec := &testkit.Recorder{}
		srv, err := New(cfg, rec, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		c := newConn(srv)
		at := min(int(cut), len(data))
		c.feed(data[:at])
		c.feed(data[at:])
		c.close()
		due, _ := srv.reg.due(srv.clock.Now(), true)
		srv.exportMetrics(due, srv.clock.Now(), true)
		render(t, rec.Received())
	})
}
