package kafkadest

import (
	"bytes"
	"encoding/binary"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// traceRequest is a request of resources x scopes x spans spans, each span of trace
// span%traces, padded with pad bytes.
func traceRequest(tb testing.TB, resources, scopes, spans, traces, pad int) []byte {
	tb.Helper()
	req := &coltracev1.ExportTraceServiceRequest{}
	id := uint64(0)
	for r := range resources {
		rs := &tracev1.ResourceSpans{Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{{Key: "service.name",
			Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: string(rune('a' + r))}}}}}, SchemaUrl: "s"}
		for range scopes {
			ss := &tracev1.ScopeSpans{Scope: &commonv1.InstrumentationScope{Name: "scope"}}
			for range spans {
				id++
				tid := make([]byte, 16)
				binary.BigEndian.PutUint64(tid[8:], id%uint64(traces)+1)
				ss.Spans = append(ss.Spans, &tracev1.Span{TraceId: tid, SpanId: binary.BigEndian.AppendUint64(nil, id), Name: "op",
					Attributes: []*commonv1.KeyValue{{Key: "pad", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: string(bytes.Repeat([]byte{'p'}, pad))}}}}})
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	b, err := req.MarshalVT()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// spanIDs decodes req as the Collector does and returns its span ids with their resource's
// service.name and their scope's name.
func spanIDs(tb testing.TB, req []byte) map[uint64]string {
	tb.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(req)
	if err != nil {
		tb.Fatalf("the Collector's decoder refuses a record: %v", err)
	}
	out := map[uint64]string{}
	for _, rs := range td.ResourceSpans().All() {
		svc, _ := rs.Resource().Attributes().Get("service.name")
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				id := sp.SpanID()
				out[binary.BigEndian.Uint64(id[:])] = svc.Str() + "/" + ss.Scope().Name() + "/" + rs.SchemaUrl()
			}
		}
	}
	return out
}

// A request is cut into records below the limit that hold, together, every span once under
// its own resource and scope; an entry larger than the limit is cut between scopes, a scope
// between spans; a span larger than the limit on its own is left out and counted.
func TestCutBelowLimit(t *testing.T) {
	f := func(name string, req []byte, limit, wantTooLarge int) {
		t.Run(name, func(t *testing.T) {
			var c cutter
			c.reset(fastpath.Traces, limit)
			if err := c.cut(req, -1); err != nil {
				t.Fatal(err)
			}
			want := spanIDs(t, req)
			got := map[uint64]string{}
			for i := range c.pieces {
				v := c.value(i)
				if len(v) > limit {
					t.Errorf("record %d holds %d bytes, limit %d", i, len(v), limit)
				}
				for id, where := range spanIDs(t, v) {
					if _, dup := got[id]; dup {
						t.Errorf("span %d in two records", id)
					}
					got[id] = where
				}
			}
			if c.tooLarge != wantTooLarge {
				t.Errorf("%d spans too large, want %d", c.tooLarge, wantTooLarge)
			}
			if len(got) != len(want)-wantTooLarge {
				t.Errorf("%d spans in the records, want %d", len(got), len(want)-wantTooLarge)
			}
			for id, where := range got {
				if want[id] != where {
					t.Errorf("span %d under %q, was under %q", id, where, want[id])
				}
			}
		})
	}
	f("fits", traceRequest(t, 3, 2, 10, 5, 10), 1<<20, 0)
	f("runs of entries", traceRequest(t, 20, 2, 10, 5, 10), 2000, 0)
	f("entries cut at scopes", traceRequest(t, 2, 10, 10, 5, 50), 3000, 0)
	f("scopes cut at spans", traceRequest(t, 2, 2, 100, 5, 50), 1000, 0)
	f("a span too large", traceRequest(t, 1, 1, 3, 1, 2000), 1000, 3)
}

// Regrouped by trace, every span is in the request of its trace, keyed by the trace id in
// hex, under its own resource and scope.
func TestByTrace(t *testing.T) {
	req := traceRequest(t, 3, 2, 20, 7, 5)
	want := spanIDs(t, req)
	var b byTrace
	if err := b.split(fastpath.Traces, req); err != nil {
		t.Fatal(err)
	}
	if len(b.reqs) != 7 {
		t.Fatalf("%d traces, want 7", len(b.reqs))
	}
	got := map[uint64]string{}
	for _, tr := range b.reqs {
		v := b.out[tr.req.from:tr.req.to]
		key := string(b.keys[tr.key.from:tr.key.to])
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if id := sp.TraceID(); key != id.String() {
						t.Errorf("span of trace %s in the request keyed %s", id, key)
					}
				}
			}
		}
		for id, where := range spanIDs(t, v) {
			got[id] = where
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d spans, want %d", len(got), len(want))
	}
	for id, where := range want {
		if got[id] != where {
			t.Errorf("span %d under %q, want %q", id, got[id], where)
		}
	}
}

// noOwner is the owner of a batch built outside a pipeline.
type noOwner struct{}

func (noOwner) BatchDone(bool) {}

// Log records are regrouped by their trace id as spans are; those without one make one request
// without a key.
func TestByTraceLogs(t *testing.T) {
	req := &collogsv1.ExportLogsServiceRequest{}
	for r := range 2 {
		sl := &logsv1.ScopeLogs{Scope: &commonv1.InstrumentationScope{Name: "scope"}}
		for i := range 12 {
			lr := &logsv1.LogRecord{TimeUnixNano: uint64(100*r + i + 1), Body: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "line"}}}
			if i%4 != 0 { // every fourth record has no trace
				lr.TraceId = bytes.Repeat([]byte{byte(i % 4)}, 16)
			}
			sl.LogRecords = append(sl.LogRecords, lr)
		}
		req.ResourceLogs = append(req.ResourceLogs, &logsv1.ResourceLogs{ScopeLogs: []*logsv1.ScopeLogs{sl}})
	}
	raw, err := req.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	var b byTrace
	if err := b.split(fastpath.Logs, raw); err != nil {
		t.Fatal(err)
	}
	if len(b.reqs) != 4 {
		t.Fatalf("%d requests, want 3 traces and one without", len(b.reqs))
	}
	seen := map[int64]bool{}
	for _, tr := range b.reqs {
		key := string(b.keys[tr.key.from:tr.key.to])
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b.out[tr.req.from:tr.req.to])
		if err != nil {
			t.Fatalf("the Collector's decoder refuses a request: %v", err)
		}
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					want := ""
					if id := lr.TraceID(); !id.IsEmpty() {
						want = id.String()
					}
					if key != want {
						t.Errorf("a record of trace %q in the request keyed %q", want, key)
					}
					seen[lr.Timestamp().AsTime().UnixNano()] = true
				}
			}
		}
	}
	if len(seen) != 24 {
		t.Errorf("%d log records, want 24", len(seen))
	}
}
