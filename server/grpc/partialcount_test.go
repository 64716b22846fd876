package grpcserver

import (
	"bytes"
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/admission"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// A v1 request with one good and one malformed resource entry is accepted with partial
// success, and counted as the OTLP/HTTP intake counts it: received, with the good entry's
// items, one partially rejected entry, and no refusal. A request with nothing to keep is
// refused as invalid, once.
func TestV1PartialSuccessCounted(t *testing.T) {
	e := start(t, testPipelineConfig(), DefaultConfig(), nil)
	type counts struct {
		reqs, items, partial  float64
		refused, refusedItems [admission.NumReasons]float64
	}
	read := func() counts {
		c := counts{
			reqs:    testutil.ToFloat64(ctr.reqs[kindV1][fastpath.Traces]),
			items:   testutil.ToFloat64(ctr.items[kindV1][fastpath.Traces]),
			partial: testutil.ToFloat64(ctr.partial[fastpath.Traces]),
		}
		for r := range admission.NumReasons {
			c.refused[r] = testutil.ToFloat64(ctr.refused[kindV1][fastpath.Traces][r])
			c.refusedItems[r] = testutil.ToFloat64(ctr.refusedItems[kindV1][fastpath.Traces][r])
		}
		return c
	}
	delta := func(before, after counts) counts {
		d := counts{reqs: after.reqs - before.reqs, items: after.items - before.items, partial: after.partial - before.partial}
		for r := range admission.NumReasons {
			d.refused[r] = after.refused[r] - before.refused[r]
			d.refusedItems[r] = after.refusedItems[r] - before.refusedItems[r]
		}
		return d
	}
	var resp coltracev1.ExportTraceServiceResponse
	invoke := func(b []byte) error {
		resp.Reset()
		var r rawBytes = b
		return e.raw.Invoke(context.Background(), coltracev1.TraceService_Export_FullMethodName, r.raw(), &resp)
	}
	// scope_spans{spans{trace_id: truncated}}: one span the scan can count, malformed inside.
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0x12, 0x04, 0x12, 0x02, 0x0a, 0x05})
	good := traceBody(t, 7, 3)

	before := read()
	if err := invoke(append(append([]byte(nil), good...), bad...)); err != nil {
		t.Fatal(err)
	}
	ps := resp.PartialSuccess
	if ps == nil || ps.RejectedSpans != 1 || ps.ErrorMessage != "1 of 2 resource entries were malformed and dropped" {
		t.Fatalf("partial success = %v; want 1 rejected span, 1 of 2 entries dropped", ps)
	}
	want := counts{reqs: 1, items: 3, partial: 1}
	if got := delta(before, read()); got != want {
		t.Errorf("partially malformed request counted %+v; want %+v (received, no refusal)", got, want)
	}
	e.p.Flush()
	if batches, items := totals(e.rec); len(batches) != 1 || !bytes.Equal(batches[0], good) || items != 3 {
		t.Fatalf("%d batches (%d items), want one holding exactly the good entry", len(batches), items)
	}

	// Nothing to keep: every entry malformed, or a top level that does not hold together.
	for _, body := range [][]byte{bad, {0x0a, 0x50, 0x01}} {
		before = read()
		if err := invoke(body); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%x: %v; want INVALID_ARGUMENT", body, err)
		}
		want = counts{}
		want.refused[admission.Invalid] = 1
		if got := delta(before, read()); got != want {
			t.Errorf("%x counted %+v; want %+v (refused invalid once)", body, got, want)
		}
	}
}
