package grpcserver

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// With -ack=upstream a request admitted and then not delivered is answered as a refusal, and
// counted as one: under upstream_failed, with the items admission took (only the good entries
// of a partially malformed v1 request), by every protocol, once.
func TestAckUpstreamFailureCounted(t *testing.T) {
	pc := testPipelineConfig()
	pc.Ack = pipeline.AckUpstream
	pc.Eager = true
	rec := testkit.NewRecorder("recorder")
	rec.SetFail(true) // every batch is given up, as after an upstream's INVALID_ARGUMENT
	e := start(t, pc, DefaultConfig(), rec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	type count struct{ reqs, items float64 }
	// Refusals of every reason, invalid included: a partially malformed v1 request whose good
	// entries were admitted is not refused as invalid too.
	read := func(k kind) count {
		var c count
		for r := range admission.NumReasons {
			c.reqs += testutil.ToFloat64(ctr.refused[k][fastpath.Traces][r])
			c.items += testutil.ToFloat64(ctr.refusedItems[k][fastpath.Traces][r])
		}
		return c
	}
	upstream := func(k kind) count {
		return count{testutil.ToFloat64(ctr.refused[k][fastpath.Traces][admission.Upstream]),
			testutil.ToFloat64(ctr.refusedItems[k][fastpath.Traces][admission.Upstream])}
	}
	check := func(k kind, allBefore, upBefore count, want count) {
		t.Helper()
		if got := upstream(k); got.reqs-upBefore.reqs != want.reqs || got.items-upBefore.items != want.items {
			t.Errorf("%s: upstream_failed rose by %v requests, %v items; want %v, %v",
				kindNames[k], got.reqs-upBefore.reqs, got.items-upBefore.items, want.reqs, want.items)
		}
		if got := read(k); got.reqs-allBefore.reqs != want.reqs || got.items-allBefore.items != want.items {
			t.Errorf("%s: refusals rose by %v requests, %v items; want %v, %v (counted once)",
				kindNames[k], got.reqs-allBefore.reqs, got.items-allBefore.items, want.reqs, want.items)
		}
	}

	// v1: two whole requests, and one whose second entry is malformed (its 2 good spans only).
	all, up := read(kindV1), upstream(kindV1)
	var resp coltracev1.ExportTraceServiceResponse
	invoke := func(b []byte) error {
		var r rawBytes = b
		return e.raw.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", r.raw(), &resp)
	}
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0x12, 0x04, 0x12, 0x02, 0x0a, 0x05})
	for _, body := range [][]byte{traceBody(t, 1, 4), traceBody(t, 2, 3), append(traceBody(t, 3, 2), bad...)} {
		err := invoke(body)
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != msgUpstream {
			t.Fatalf("v1: %v; want UNAVAILABLE %q", err, msgUpstream)
		}
	}
	check(kindV1, all, up, count{3, 9})

	// OTEP unary.
	all, up = read(kindOTEPUnary), upstream(kindOTEPUnary)
	var oresp otepv1.ExportResponse
	for id := uint64(1); id <= 2; id++ {
		var r rawBytes = otepReq(t, id, traceBody(t, id, 5))
		if err := e.raw.Invoke(ctx, "/otlpgate.otep.v1.UnaryExporter/ExportTraces", r.raw(), &oresp); err != nil ||
			oresp.Id != id || oresp.ResultCode != otepv1.ResultCode_FailedRetryable {
			t.Fatalf("otep unary %d: %v, %v", id, &oresp, err)
		}
	}
	check(kindOTEPUnary, all, up, count{2, 10})

	// OTEP stream.
	all, up = read(kindOTEPStream), upstream(kindOTEPStream)
	s := e.rawStream(t, ctx)
	for id := uint64(1); id <= 3; id++ {
		sendRaw(t, s, otepReq(t, id, traceBody(t, id, 2)))
	}
	for range 3 {
		if r, err := recvResp(t, s); err != nil || r.ResultCode != otepv1.ResultCode_FailedRetryable {
			t.Fatalf("otep stream: %v, %v", r, err)
		}
	}
	s.CloseSend()
	if _, err := drainEOF(s); err != nil {
		t.Fatal(err)
	}
	check(kindOTEPStream, all, up, count{3, 6})
}
