package l7lb

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	gw "github.com/otlpgate/otlpgate/internal/gateway"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
)

// gnet's worker pool (ants), linked in by the gateway's UDS intake, starts its cleaner
// goroutines when the package initialises: they belong to the dependency, not to a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// spansSince is how many spans arrived at rec; since, if not zero, counts only those that
// arrived after it.
func spansSince(rec *testkit.Recorder, since time.Time) int {
	n := 0
	for _, g := range rec.Received() {
		if g.At.After(since) {
			ids, _ := testkit.SpanIDs(g.Body)
			n += len(ids)
		}
	}
	return n
}

// gateway is an otlpgate gateway built in the test as cmd/otlpgate builds it: the gRPC intake
// and a pipeline in front of a recorder.
type gateway struct {
	rec  *testkit.Recorder
	addr string
}

// gatewayConfig is an otlpgate with every listener off: each test turns on what it uses.
func gatewayConfig() gw.Config {
	c := gw.DefaultConfig()
	c.GRPC.Listen, c.HTTP.Listen, c.Kafka.Listen, c.UDS.Listen, c.Admin.Listen = "", "", "", "", ""
	return c
}

func startGateway(t *testing.T, name string, maxAge time.Duration) *gateway {
	t.Helper()
	return startGatewayOn(t, name, maxAge, "")
}

// startGatewayOn is startGateway with its intake on the gRPC transport transport
// (-grpc.transport; "" for the default).
func startGatewayOn(t *testing.T, name string, maxAge time.Duration, transport string) *gateway {
	t.Helper()
	return startGatewayWith(t, name, func(c *grpcserver.Config) {
		c.StreamMaxAge = maxAge
		if transport != "" {
			c.Transport = transport
		}
	})
}

// startGatewayWith is startGateway with its intake's configuration changed by edit.
func startGatewayWith(t *testing.T, name string, edit func(*grpcserver.Config)) *gateway {
	t.Helper()
	g := &gateway{rec: testkit.NewRecorder(name)}
	cfg := gatewayConfig()
	cfg.GRPC.Listen = "127.0.0.1:0"
	edit(&cfg.GRPC)
	cfg.Extra = []pipeline.Destination{g.rec}
	gate, err := gw.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.addr = gate.GRPCAddr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gate.Shutdown(ctx)
	})
	return g
}

// edge is an otlpgate edge: a pipeline whose one destination streams OTEP to the balancer.
type edge struct {
	p    *pipeline.Pipeline
	gate *gw.Gateway
}

func startEdge(t *testing.T, cfg client.Config) *edge {
	t.Helper()
	c := gatewayConfig()
	c.Pipeline.BatchMaxItems = 16
	c.Destinations = []client.Config{cfg}
	c.ShutdownTimeout = 20 * time.Second
	gate, err := gw.New(c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := &edge{p: gate.Pipeline(), gate: gate}
	t.Cleanup(func() { e.close(t) })
	return e
}

var edgeClosed sync.Map

func (e *edge) close(t *testing.T) {
	if _, done := edgeClosed.LoadOrStore(e, true); done {
		return
	}
	if err := e.gate.Shutdown(context.Background()); err != nil {
		t.Errorf("edge shutdown: %v", err)
	}
}

// edgeConfig is a stream destination to addr with test-sized timers.
func edgeConfig(name, addr string, streams int, rebalance time.Duration) client.Config {
	c := client.DefaultConfig()
	c.Name, c.Endpoint = name, addr
	c.Protocol, c.Mode = client.ProtocolOTEP, client.ModeStream
	c.Streams, c.Window = streams, 16
	c.RebalanceTimeout = rebalance
	c.RebalanceRequests = 0
	c.RetryInitial, c.RetryMax, c.RetryMaxElapsed = 10*time.Millisecond, 200*time.Millisecond, 2*time.Minute
	c.AckTimeout = 30 * time.Second
	return c
}

// spanBody is a v1 trace request body holding one span whose span id is id.
func spanBody(id uint64) []byte { return paddedSpanBody(id, "v") }

// paddedSpanBody is spanBody with attribute value v.
func paddedSpanBody(id uint64, v string) []byte {
	sp := &tracev1.Span{TraceId: make([]byte, 16), SpanId: binary.BigEndian.AppendUint64(nil, id), Name: "l7lb",
		Attributes: []*commonv1.KeyValue{{Key: "k", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}}}
	req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{sp}}}}}}
	b, _ := req.MarshalVT()
	return b
}

// load admits one-span requests into the edge, ids first.., one every gap, for dur, calling
// at(i) before each (to reload mid-run). It returns the ids admitted (acknowledged to a client).
func load(t *testing.T, e *edge, first uint64, dur, gap time.Duration, at func(elapsed time.Duration)) []uint64 {
	return loadBodies(t, e, first, dur, gap, at, spanBody)
}

// loadBodies is load with the request bodies body(id) makes.
func loadBodies(t *testing.T, e *edge, first uint64, dur, gap time.Duration, at func(elapsed time.Duration), body func(uint64) []byte) []uint64 {
	t.Helper()
	var admitted []uint64
	start := time.Now()
	for id := first; ; id++ {
		el := time.Since(start)
		if el >= dur {
			break
		}
		if at != nil {
			at(el)
		}
		for tries := 0; ; tries++ {
			err := e.p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body(id), Items: 1})
			if err == nil {
				admitted = append(admitted, id)
				break
			}
			if tries > 1000 {
				t.Fatalf("span %d not admitted: %v", id, err)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(gap)
	}
	return admitted
}

// settle waits until every admitted id arrived at some gateway and returns the duplicates.
func settle(t *testing.T, admitted []uint64, gws ...*gateway) (dups int) {
	t.Helper()
	var seen map[uint64]int
	testkit.WaitFor(t, fmt.Sprintf("all %d admitted spans to reach a gateway", len(admitted)), func() bool {
		seen = map[uint64]int{}
		for _, g := range gws {
			ids, _ := g.rec.SpanIDs()
			for id, n := range ids {
				seen[id] += n
			}
		}
		for _, id := range admitted {
			if seen[id] == 0 {
				return false
			}
		}
		return true
	})
	for _, n := range seen {
		dups += n - 1
	}
	return dups
}

// counter sums a counter of the default registry over the series carrying label=value.
func counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// shares is each gateway's fraction of the spans that arrived after since.
func shares(since time.Time, gws ...*gateway) []float64 {
	total := 0
	counts := make([]int, len(gws))
	for i, g := range gws {
		counts[i] = spansSince(g.rec, since)
		total += counts[i]
	}
	out := make([]float64, len(gws))
	for i := range counts {
		if total > 0 {
			out[i] = float64(counts[i]) / float64(total)
		}
	}
	return out
}

var edgeSeq atomic.Int64
