package strictsink

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSinkDecodesLikeTheCollector sends the sink, over gRPC, a trace request with a well-formed
// span, one whose trace id is 8 bytes, and an empty logs request: the sink accepts the first
// and the last, refuses the second with INVALID_ARGUMENT, and records what it accepted.
func TestSinkDecodesLikeTheCollector(t *testing.T) {
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// ExportTraceServiceRequest{resource_spans{scope_spans{spans{trace_id, span_id}}}}
	span := func(traceID []byte) []byte {
		sp := append([]byte{0x0a, byte(len(traceID))}, traceID...)
		sp = append(sp, 0x12, 8, 1, 2, 3, 4, 5, 6, 7, 8)
		ss := append([]byte{0x12, byte(len(sp))}, sp...)
		rs := append([]byte{0x12, byte(len(ss))}, ss...)
		return append([]byte{0x0a, byte(len(rs))}, rs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(method string, b []byte) error {
		var req, resp codec.Raw
		req.SetBytes(b)
		defer resp.Release()
		return conn.Invoke(ctx, method, &req, &resp)
	}
	const traces = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	if err := call(traces, span(make([]byte, 16))); err != nil {
		t.Fatalf("well-formed request: %v", err)
	}
	if err := call(traces, span(make([]byte, 8))); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("trace id of 8 bytes: %v, want INVALID_ARGUMENT", err)
	}
	if err := call("/opentelemetry.proto.collector.logs.v1.LogsService/Export", nil); err != nil {
		t.Fatalf("empty logs request: %v", err)
	}
	if a, r := s.Accepted(fastpath.Traces), s.Refused(fastpath.Traces); a != 1 || r != 1 {
		t.Fatalf("traces accepted %d, refused %d; want 1 and 1", a, r)
	}
	if a, r := s.Accepted(fastpath.Logs), s.Refused(fastpath.Logs); a != 1 || r != 0 || len(s.Logs()) != 1 {
		t.Fatalf("logs accepted %d, refused %d, recorded %d; want 1, 0, 1", a, r, len(s.Logs()))
	}
	if s.LastError() == nil {
		t.Fatal("no decoder error recorded")
	}
	spans := s.Spans()
	if len(spans) != 1 || spans[pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8}] != 1 {
		t.Fatalf("spans recorded: %v", spans)
	}
}
