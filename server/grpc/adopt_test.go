package grpcserver

import (
	"bytes"
	"context"
	"testing"

	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// A v1 message of many frames is copied once, into a buffer of the intake's own; a batch the
// message opens takes that buffer over instead of copying it again, and the intake releases
// only the buffer it got in exchange (poisoned on release in race builds, see pool's checked
// builds): the destination gets each exact message, the one adopted and the one that joined
// its batch (copied).
func TestV1MessageAdoptedIntoBatch(t *testing.T) {
	pc := testPipelineConfig()
	pc.Eager = false // the second message joins the first's batch
	e := start(t, pc, DefaultConfig(), nil)
	ctx := context.Background()
	bodies := [][]byte{traceBody(t, 200, 1000), traceBody(t, 201, 1500)}
	adopted := testkit.Counter(t, "otlpgate_fastpath_adopted_bytes_total")
	for i, body := range bodies {
		var r rawBytes = body
		if err := e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), new(coltracev1.ExportTraceServiceResponse)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if got := testkit.Counter(t, "otlpgate_fastpath_adopted_bytes_total") - adopted; got != float64(len(bodies[0])) {
		t.Fatalf("adopted %v bytes, want the first message's %d alone", got, len(bodies[0]))
	}
	e.p.Flush()
	batches, items := totals(e.rec)
	if all, want := bytes.Join(batches, nil), bytes.Join(bodies, nil); !bytes.Equal(all, want) || items != 2500 {
		t.Fatalf("the destination got %d bytes and %d spans, want %d and 2500", len(all), items, len(want))
	}
}
