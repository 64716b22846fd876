package httpserver

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// With -ack=upstream a request admitted and then not delivered is answered 503, and counted
// as refused: under upstream_failed, with the items admission took (only the good entries of a
// partially malformed request), once, in protobuf as received, compressed and in JSON.
func TestAckUpstreamFailureCounted(t *testing.T) {
	pc := testPipelineConfig()
	pc.Ack = pipeline.AckUpstream
	pc.Eager = true
	rec := testkit.NewRecorder("recorder")
	rec.SetFail(true) // every batch is given up, as after an upstream's 400
	e := start(t, pc, DefaultConfig(), rec)

	type count struct{ reqs, items float64 }
	read := func(f format, r admission.Reason) count {
		return count{testutil.ToFloat64(ctr.refused[f][fastpath.Traces][r]),
			testutil.ToFloat64(ctr.refusedItems[f][fastpath.Traces][r])}
	}
	all := func(f format) count {
		var c count
		for r := range admission.NumReasons {
			n := read(f, r)
			c.reqs += n.reqs
			c.items += n.items
		}
		return c
	}
	var upBefore, allBefore [numFormats]count
	for f := range numFormats {
		upBefore[f], allBefore[f] = read(f, admission.Upstream), all(f)
	}

	json := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5B8EFFF798038103D269B633813FC60C",` +
		`"spanId":"eee19b7ec3c1b174","name":"a"},{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"eee19b7ec3c1b175","name":"b"}]}]}]}`
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		body []byte
	}{
		{"proto", map[string]string{"Content-Type": ctProto}, traces(t, 1, 3)},
		{"proto gzip", map[string]string{"Content-Type": ctProto, "Content-Encoding": "gzip"}, gzipped(t, traces(t, 2, 4))},
		{"proto partly malformed", map[string]string{"Content-Type": ctProto}, append(traces(t, 3, 5), badSpanEntry...)},
		{"json", map[string]string{"Content-Type": ctJSON}, []byte(json)},
	} {
		r := e.do(t, "POST", "/v1/traces", tc.hdr, tc.body)
		if tc.name == "json" {
			if r.status != 503 || r.header.Get("Retry-After") == "" {
				t.Fatalf("%s: %d %q", tc.name, r.status, r.body)
			}
			continue
		}
		wantStatus(t, r, 503, codes.Unavailable, msgUpstream)
	}
	want := [numFormats]count{encProto: {3, 12}, encJSON: {1, 2}}
	for f := range numFormats {
		if got := read(f, admission.Upstream); got.reqs-upBefore[f].reqs != want[f].reqs || got.items-upBefore[f].items != want[f].items {
			t.Errorf("%s: upstream_failed rose by %v requests, %v items; want %v, %v",
				formatNames[f], got.reqs-upBefore[f].reqs, got.items-upBefore[f].items, want[f].reqs, want[f].items)
		}
		if got := all(f); got.reqs-allBefore[f].reqs != want[f].reqs || got.items-allBefore[f].items != want[f].items {
			t.Errorf("%s: refusals rose by %v requests, %v items; want %v, %v (counted once)",
				formatNames[f], got.reqs-allBefore[f].reqs, got.items-allBefore[f].items, want[f].reqs, want[f].items)
		}
	}
}
