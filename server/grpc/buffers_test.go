package grpcserver

import (
	"bytes"
	"context"
	"testing"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// Requests of many HTTP/2 frames, one after another, come out of the intake byte for byte
// whichever pool the frames are read into: otlpgate's, which hands back buffers with the
// previous request's bytes still in them (the default), or grpc-go's, which zeroes them
// (-grpc.zero-buffers). A frame buffer used before the transport filled it would show here as
// a batch holding another request's bytes.
func TestFrameBuffersCarryExactBytes(t *testing.T) {
	for _, zero := range []bool{false, true} {
		sc := DefaultConfig()
		sc.ZeroBuffers = zero
		e := start(t, testPipelineConfig(), sc, nil)
		ctx := context.Background()
		var want []byte
		items := 0
		// Bodies of different lengths (140 to 420 KiB: 9 to 27 frames of 16 KiB, the last one
		// short), so that a short frame lands in a buffer a full one used before.
		for i, spans := range []int{3000, 1000, 2500, 1700} {
			body := traceBody(t, uint64(100+i), spans)
			var r rawBytes = body
			if err := e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), new(coltracev1.ExportTraceServiceResponse)); err != nil {
				t.Fatalf("zero-buffers=%v, request %d: %v", zero, i, err)
			}
			want = append(want, body...)
			items += spans
		}
		e.p.Flush()
		batches, got := totals(e.rec)
		all := bytes.Join(batches, nil)
		if !bytes.Equal(all, want) || got != items {
			t.Fatalf("zero-buffers=%v: the destination got %d bytes and %d spans, want %d and %d", zero, len(all), got, len(want), items)
		}
	}
}
