package reliability

import (
	"context"
	"encoding/binary"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/gateway"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// unknownFields counts, over the batches rec received, the top-level fields other than the
// resource entries (there must be none).
func unknownFields(rec *testkit.Recorder) int {
	unknown := 0
	for _, g := range rec.Received() {
		for it := fastpath.NewTopLevel(g.Body); ; {
			f, ok := it.Next()
			if !ok {
				break
			}
			if f.Num != 1 {
				unknown++
			}
		}
	}
	return unknown
}

// An edge (gRPC intake, pipeline, OTEP stream destination) forwards to a gateway (gRPC intake,
// pipeline, a recording destination). Among 340 one-span v1 Export calls, every ninth carries a
// top-level field no v1 schema defines, appended after the resource entry: field 2 as empty
// bytes (the OTEP entry field, `12 00`), field 5 as a varint, field 9 as fixed32, field 7 as a
// non-empty bytes value. They share batches with the good ones. Every call is answered OK, and
// every span arrives at the gateway: the good ones and the known content of the odd ones,
// while the odd fields are stripped and counted at admission.
func TestUnknownTopLevelFieldDoesNotPoisonBatch(t *testing.T) {
	sink := testkit.NewRecorder("poison_sink")
	log := slog.New(slog.DiscardHandler)
	gcfg := gateway.DefaultConfig()
	gcfg.GRPC.Listen = "127.0.0.1:0"
	gcfg.HTTP.Listen, gcfg.Kafka.Listen, gcfg.UDS.Listen, gcfg.Admin.Listen = "", "", "", ""
	gcfg.Pipeline = pipelineConfig()
	gcfg.Extra = []pipeline.Destination{sink}
	gw, err := gateway.New(gcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	gp := gw.Pipeline()
	// Cleanups run last first: the edge, started below, stops before the gateway.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
	})

	epc := pipelineConfig()
	epc.BatchMaxItems = 50 // batches of several calls, good and odd mixed
	epc.BatchMaxAge = 20 * time.Millisecond
	epc.Eager = false
	edge := startGate(t, epc, destConfig("poison_edge", gw.GRPCAddr().String()))
	strippedBefore := metric(t, "otlpgate_fastpath_stripped_fields_total", map[string]string{"signal": "traces"})

	conn, err := grpc.NewClient(edge.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	const good, odd = 300, 40 // 37 of the 340 are odd
	tails := [][]byte{
		{0x12, 0x00},                // field 2, empty bytes
		{0x28, 0x07},                // field 5, varint 7
		{0x4d, 1, 2, 3, 4},          // field 9, fixed32
		{0x3a, 0x03, 'a', 'b', 'c'}, // field 7, bytes "abc"
	}
	body := func(id uint64) []byte {
		sp := &tracev1.Span{TraceId: make([]byte, 16), SpanId: binary.BigEndian.AppendUint64(nil, id), Name: "poison"}
		req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{sp}}}}}}
		b, err := req.MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, good+odd)
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < good+odd; i += workers {
				id := uint64(i + 1)
				b := body(id)
				// Every ninth call is odd: spread over the run, next to good ones.
				if i%9 == 8 && i/9 < odd {
					b = append(b, tails[(i/9)%len(tails)]...)
				}
				var r, resp codec.Raw
				r.SetBytes(b)
				err := conn.Invoke(ctx, coltracev1.TraceService_Export_FullMethodName, &r, &resp)
				resp.Release()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("an Export call failed: %v", err)
	}
	oddSent := 0
	for i := range good + odd {
		if i%9 == 8 && i/9 < odd {
			oddSent++
		}
	}
	if oddSent != 37 {
		t.Fatalf("test set-up: %d odd calls", oddSent)
	}

	// Once the edge finished every batch, the gateway admitted all it will get; its sink
	// finishes a batch as soon as it is sealed.
	edge.drained(t, time.Minute)
	testkit.WaitFor(t, "the gateway to deliver every byte it holds", func() bool {
		gp.Flush()
		return gp.QueuedBytes() == 0
	})
	seen, bad := sink.SpanIDs()
	unknown := unknownFields(sink)
	var missing []uint64
	for id := uint64(1); id <= good+odd; id++ {
		if seen[id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d spans never reached the gateway, e.g. %v", len(missing), good+odd, missing[:min(len(missing), 10)])
	}
	if len(seen) != good+odd {
		t.Fatalf("the gateway saw %d distinct spans, want %d", len(seen), good+odd)
	}
	if unknown != 0 || bad != 0 {
		t.Fatalf("gateway batches held %d unknown top-level fields and %d undecodable batches", unknown, bad)
	}
	if got := metric(t, "otlpgate_fastpath_stripped_fields_total", map[string]string{"signal": "traces"}) - strippedBefore; got != float64(oddSent) {
		t.Fatalf("stripped fields counted %v, want %d", got, oddSent)
	}
	dropped := metric(t, "otlpgate_client_dropped_requests_total", map[string]string{"destination": "poison_edge"})
	if dropped != 0 {
		t.Fatalf("the edge dropped %v requests", dropped)
	}
}
