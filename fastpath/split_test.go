package fastpath_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// modPicker owns key k by k mod n: not consistent, but it spreads keys and is easy to predict.
type modPicker struct{ n int }

func (m *modPicker) Pick(k uint64) int { return int(k % uint64(m.n)) }

func splitTraceID(i int) []byte {
	id := make([]byte, 16)
	binary.BigEndian.PutUint64(id, uint64(i)*0x9e3779b97f4a7c15+1)
	binary.BigEndian.PutUint64(id[8:], uint64(i))
	return id
}

func res(service string, extra int) *resourcev1.Resource {
	return &resourcev1.Resource{Attributes: []*commonv1.KeyValue{
		{Key: "service.name", Value: str(service)},
		{Key: "host", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: int64(extra)}}},
	}, DroppedAttributesCount: uint32(extra)}
}

// splitTraces is a batch of three resource entries: two services with two scopes of spans
// from eight traces interleaved, one scope without spans, and one entry without scopes.
func splitTraces(tb testing.TB) []byte {
	req := &coltracev1.ExportTraceServiceRequest{}
	n := 0
	for r := range 2 {
		rs := &tracev1.ResourceSpans{Resource: res(fmt.Sprintf("svc-%d", r), r), SchemaUrl: "https://r/" + fmt.Sprint(r)}
		for sc := range 3 {
			ss := &tracev1.ScopeSpans{Scope: &commonv1.InstrumentationScope{Name: fmt.Sprintf("lib-%d", sc), Version: "1"}, SchemaUrl: "https://s"}
			if sc < 2 {
				for range 12 {
					ss.Spans = append(ss.Spans, &tracev1.Span{TraceId: splitTraceID(n % 8), SpanId: binary.BigEndian.AppendUint64(nil, uint64(n)), Name: fmt.Sprint("span-", n)})
					n++
				}
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	req.ResourceSpans = append(req.ResourceSpans, &tracev1.ResourceSpans{Resource: res("idle", 9)})
	return mustMarshal(tb, req)
}

type spanAt struct {
	res   *resourcev1.Resource
	rURL  string
	scope *commonv1.InstrumentationScope
	sURL  string
	span  *tracev1.Span
}

func flattenTraces(tb testing.TB, b []byte) []spanAt {
	var req coltracev1.ExportTraceServiceRequest
	if err := req.UnmarshalVT(b); err != nil {
		tb.Fatal(err)
	}
	var out []spanAt
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				out = append(out, spanAt{rs.Resource, rs.SchemaUrl, ss.Scope, ss.SchemaUrl, sp})
			}
		}
	}
	return out
}

// attrsKey is the resource key computed independently of the splitter: the hash of every
// attribute field as marshalled.
func attrsKey(tb testing.TB, r *resourcev1.Resource) uint64 {
	var b []byte
	for _, kv := range r.Attributes {
		m := mustMarshal(tb, kv)
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return fastpath.HashKey(b)
}

func serviceKey(tb testing.TB, r *resourcev1.Resource) uint64 {
	for _, kv := range r.Attributes {
		if kv.Key == "service.name" {
			return fastpath.HashKey(mustMarshal(tb, kv.Value))
		}
	}
	return fastpath.HashKey(nil)
}

func partBytes(s *fastpath.Splitter, p int) []byte {
	b, _ := s.Part(p)
	return b
}

func partItems(s *fastpath.Splitter, p int) int {
	_, n := s.Part(p)
	return n
}

func releaseParts(s *fastpath.Splitter) { s.ReleaseParts() }

func TestSplitTracesByTraceID(t *testing.T) {
	in := splitTraces(t)
	all := flattenTraces(t, in)
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pick := &modPicker{n}
			s := fastpath.GetSplitter()
			defer fastpath.PutSplitter(s)
			whole, err := s.Partition(fastpath.Traces, in, fastpath.SplitTraceID, n, pick)
			if err != nil || whole != -1 {
				t.Fatalf("partition: whole %d, err %v", whole, err)
			}
			defer releaseParts(s)
			seen := 0
			for p := range n {
				var want []spanAt
				for _, sa := range all {
					if pick.Pick(fastpath.HashKey(sa.span.TraceId)) == p {
						want = append(want, sa)
					}
				}
				idle := mustMarshal(t, &tracev1.ResourceSpans{Resource: res("idle", 9)})
				idleField := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), idle)
				idleHere := pick.Pick(attrsKey(t, res("idle", 9))) == p
				b := partBytes(s, p)
				if got := bytes.Contains(b, idleField); got != idleHere {
					t.Errorf("part %d: holds the entry without spans: %v, want %v", p, got, idleHere)
				}
				if len(want) == 0 && !idleHere {
					if b != nil {
						t.Errorf("part %d: %d bytes, want none", p, len(b))
					}
					continue
				}
				got := flattenTraces(t, b)
				if len(got) != len(want) || partItems(s, p) != len(want) {
					t.Fatalf("part %d: %d spans, counted %d, want %d", p, len(got), partItems(s, p), len(want))
				}
				for i := range got {
					g, w := got[i], want[i]
					if !g.span.EqualVT(w.span) || !g.res.EqualVT(w.res) || !g.scope.EqualVT(w.scope) || g.rURL != w.rURL || g.sURL != w.sURL {
						t.Errorf("part %d span %d: got %s in %v/%v, want %s", p, i, g.span.Name, g.res, g.scope, w.span.Name)
					}
				}
				seen += len(got)
			}
			if seen != len(all) {
				t.Fatalf("%d spans in the parts, want %d", seen, len(all))
			}
		})
	}
}

// onePicker owns every key by part `to`.
type onePicker struct{ to int }

func (o *onePicker) Pick(uint64) int { return o.to }

// splitKeyNames names the keys in the tests' output as -dest balance= does.
var splitKeyNames = [...]string{fastpath.SplitTraceID: "trace_id", fastpath.SplitService: "service", fastpath.SplitResource: "resource"}

func TestSplitWholeWhenOneOwner(t *testing.T) {
	in := splitTraces(t)
	s := fastpath.GetSplitter()
	defer fastpath.PutSplitter(s)
	for _, bal := range []fastpath.SplitKey{fastpath.SplitTraceID, fastpath.SplitService, fastpath.SplitResource} {
		whole, err := s.Partition(fastpath.Traces, in, bal, 4, &onePicker{2})
		if err != nil || whole != 2 {
			t.Fatalf("%s: whole %d, err %v; want 2", splitKeyNames[bal], whole, err)
		}
	}
	// One trace only, several parts: still whole.
	one := mustMarshal(t, &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{TraceId: splitTraceID(7)}, {TraceId: splitTraceID(7)}}}}}}})
	pick := &modPicker{3}
	whole, err := s.Partition(fastpath.Traces, one, fastpath.SplitTraceID, 3, pick)
	if want := pick.Pick(fastpath.HashKey(splitTraceID(7))); err != nil || whole != want {
		t.Fatalf("one trace: whole %d, err %v; want %d", whole, err, want)
	}
}

func TestSplitByResourceAndService(t *testing.T) {
	in := splitTraces(t)
	var req coltracev1.ExportTraceServiceRequest
	if err := req.UnmarshalVT(in); err != nil {
		t.Fatal(err)
	}
	for _, bal := range []fastpath.SplitKey{fastpath.SplitService, fastpath.SplitResource} {
		t.Run(splitKeyNames[bal], func(t *testing.T) {
			pick := &modPicker{3}
			s := fastpath.GetSplitter()
			defer fastpath.PutSplitter(s)
			whole, err := s.Partition(fastpath.Traces, in, bal, 3, pick)
			if err != nil {
				t.Fatal(err)
			}
			want := make([][]byte, 3)
			items := make([]int, 3)
			for _, rs := range req.ResourceSpans {
				k := attrsKey(t, rs.Resource)
				if bal == fastpath.SplitService {
					k = serviceKey(t, rs.Resource)
				}
				p := pick.Pick(k)
				want[p] = protowire.AppendTag(want[p], 1, protowire.BytesType)
				want[p] = protowire.AppendBytes(want[p], mustMarshal(t, rs))
				for _, ss := range rs.ScopeSpans {
					items[p] += len(ss.Spans)
				}
			}
			if whole >= 0 {
				for p := range 3 {
					if (p == whole) != (want[p] != nil) {
						t.Fatalf("whole to %d, but part %d wants %d bytes", whole, p, len(want[p]))
					}
				}
				return
			}
			defer releaseParts(s)
			for p := range 3 {
				if got := partBytes(s, p); !bytes.Equal(got, want[p]) || partItems(s, p) != items[p] {
					t.Errorf("part %d: %d bytes, %d items; want %d bytes, %d items", p, len(got), partItems(s, p), len(want[p]), items[p])
				}
			}
		})
	}
}

func TestSplitLogs(t *testing.T) {
	req := &collogsv1.ExportLogsServiceRequest{}
	for r := range 2 {
		rl := &logsv1.ResourceLogs{Resource: res(fmt.Sprint("svc-", r), r)}
		sl := &logsv1.ScopeLogs{Scope: &commonv1.InstrumentationScope{Name: "log"}}
		for i := range 20 {
			lr := &logsv1.LogRecord{Body: str(fmt.Sprint("rec-", r, "-", i))}
			switch i % 3 {
			case 0:
				lr.TraceId = splitTraceID(i)
			case 1:
				lr.TraceId = make([]byte, 16) // all zero: no trace
			}
			sl.LogRecords = append(sl.LogRecords, lr)
		}
		rl.ScopeLogs = append(rl.ScopeLogs, sl)
		req.ResourceLogs = append(req.ResourceLogs, rl)
	}
	in := mustMarshal(t, req)
	pick := &modPicker{3}
	s := fastpath.GetSplitter()
	defer fastpath.PutSplitter(s)
	whole, err := s.Partition(fastpath.Logs, in, fastpath.SplitTraceID, 3, pick)
	if err != nil || whole != -1 {
		t.Fatalf("whole %d, err %v", whole, err)
	}
	defer releaseParts(s)
	total := 0
	for p := range 3 {
		var want []string
		for _, rl := range req.ResourceLogs {
			for _, lr := range rl.ScopeLogs[0].LogRecords {
				k := attrsKey(t, rl.Resource)
				if bytes.ContainsFunc(lr.TraceId, func(r rune) bool { return r != 0 }) {
					k = fastpath.HashKey(lr.TraceId)
				}
				if pick.Pick(k) == p {
					want = append(want, lr.Body.GetStringValue())
				}
			}
		}
		var got collogsv1.ExportLogsServiceRequest
		if err := got.UnmarshalVT(partBytes(s, p)); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, rl := range got.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				if sl.Scope.GetName() != "log" {
					t.Errorf("scope lost: %v", sl.Scope)
				}
				for _, lr := range sl.LogRecords {
					names = append(names, lr.Body.GetStringValue())
					svc := rl.Resource.Attributes[0].Value.GetStringValue()
					if want := "svc-" + lr.Body.GetStringValue()[4:5]; svc != want {
						t.Errorf("record %s under %s", lr.Body.GetStringValue(), svc)
					}
				}
			}
		}
		if fmt.Sprint(names) != fmt.Sprint(want) || partItems(s, p) != len(want) {
			t.Errorf("part %d: %v (counted %d), want %v", p, names, partItems(s, p), want)
		}
		total += len(names)
	}
	if total != 40 {
		t.Fatalf("%d records in the parts, want 40", total)
	}
}

func TestSplitMetricsByResource(t *testing.T) {
	req := &colmetricsv1.ExportMetricsServiceRequest{}
	for r := range 6 {
		req.ResourceMetrics = append(req.ResourceMetrics, &metricsv1.ResourceMetrics{
			Resource: res(fmt.Sprint("svc-", r%2), r),
			ScopeMetrics: []*metricsv1.ScopeMetrics{{Metrics: []*metricsv1.Metric{{Name: "m",
				Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{DataPoints: numberPoints(r + 1)}}}}}},
		})
	}
	in := mustMarshal(t, req)
	for _, bal := range []fastpath.SplitKey{fastpath.SplitTraceID, fastpath.SplitService, fastpath.SplitResource} {
		pick := &modPicker{2}
		s := fastpath.GetSplitter()
		whole, err := s.Partition(fastpath.Metrics, in, bal, 2, pick)
		if err != nil {
			t.Fatal(err)
		}
		want := make([][]byte, 2)
		items := make([]int, 2)
		for _, rm := range req.ResourceMetrics {
			k := attrsKey(t, rm.Resource)
			if bal == fastpath.SplitService {
				k = serviceKey(t, rm.Resource)
			}
			p := pick.Pick(k)
			want[p] = protowire.AppendBytes(protowire.AppendTag(want[p], 1, protowire.BytesType), mustMarshal(t, rm))
			items[p] += len(rm.ScopeMetrics[0].Metrics[0].GetGauge().DataPoints)
		}
		if whole >= 0 {
			if want[1-whole] != nil {
				t.Errorf("%v: whole to %d, but the other part wants %d bytes", bal, whole, len(want[1-whole]))
			}
		} else {
			for p := range 2 {
				if !bytes.Equal(partBytes(s, p), want[p]) || partItems(s, p) != items[p] {
					t.Errorf("%v part %d: %d bytes, %d items; want %d bytes, %d items", bal, p, len(partBytes(s, p)), partItems(s, p), len(want[p]), items[p])
				}
			}
			releaseParts(s)
		}
		fastpath.PutSplitter(s)
	}
}

func TestSplitMalformed(t *testing.T) {
	in := splitTraces(t)
	s := fastpath.GetSplitter()
	defer fastpath.PutSplitter(s)
	for _, cut := range []int{1, 2, 30, len(in) - 1} {
		if _, err := s.Partition(fastpath.Traces, in[:cut], fastpath.SplitTraceID, 3, &modPicker{3}); err == nil {
			t.Errorf("cut at %d: no error", cut)
		}
	}
}

// splitDest is a destination that splits each batch three ways and records and finishes the
// parts, as a balanced destination does.
type splitDest struct {
	wholes, splits int
	got            []part
}

type part struct {
	items int
	body  []byte
}

func (d *splitDest) Name() string { return "split" }

func (d *splitDest) Enqueue(b *pipeline.Batch) error {
	s := pipeline.GetSplitter()
	defer pipeline.PutSplitter(s)
	whole, parts, err := s.Split(b, fastpath.SplitTraceID, 3, &modPicker{3})
	if err != nil {
		return err
	}
	if whole >= 0 {
		d.wholes++
		parts = []*pipeline.Batch{b}
	} else {
		d.splits++
	}
	for _, k := range parts {
		if k != nil {
			d.got = append(d.got, part{k.Items, bytes.Clone(k.Payload.Bytes())})
			k.Done(true)
		}
	}
	return nil
}

func TestSplitThroughPipeline(t *testing.T) {
	d := &splitDest{}
	p, err := pipeline.New(pipeline.DefaultConfig(), []pipeline.Destination{d})
	if err != nil {
		t.Fatal(err)
	}
	in := splitTraces(t)
	if err := p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: in, Items: 48}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if d.splits != 1 || len(d.got) != 3 {
		t.Fatalf("%d splits into %d parts, want 1 into 3", d.splits, len(d.got))
	}
	spans := 0
	for _, g := range d.got {
		spans += g.items
		if n := len(flattenTraces(t, g.body)); n != g.items {
			t.Errorf("part holds %d spans, says %d", n, g.items)
		}
	}
	if spans != 48 {
		t.Errorf("%d spans in the parts, want 48", spans)
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("%d bytes still queued after every part was finished", q)
	}
}

func FuzzSplit(f *testing.F) {
	f.Add(splitTraces(f), uint8(0), uint8(3))
	for _, fx := range fixtures(f) {
		f.Add(fx.v1, uint8(fx.sig), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, sig, n uint8) {
		sg := fastpath.Signal(sig % uint8(fastpath.NumSignals))
		parts := int(n%7) + 1
		s := fastpath.GetSplitter()
		defer fastpath.PutSplitter(s)
		for bal := range fastpath.SplitKey(fastpath.NumSplitKeys) {
			whole, err := s.Partition(sg, b, bal, parts, &modPicker{parts})
			if err != nil || whole >= 0 {
				continue
			}
			// Every byte of the input's items is in exactly one part, and every part parses.
			total := 0
			for p := range parts {
				if pb := partBytes(s, p); pb != nil {
					if _, err := fastpath.ScanRequest(sg, pb, fastpath.LayoutV1, fastpath.DepthResource); err != nil {
						t.Fatalf("part %d does not scan: %v", p, err)
					}
					total += partItems(s, p)
				}
			}
			if sc, err := fastpath.ScanRequest(sg, b, fastpath.LayoutV1, fastpath.DepthResource); err == nil && sg != fastpath.Metrics && bal == fastpath.SplitTraceID && total != sc.Items {
				t.Fatalf("%d items in the parts, %d in the batch", total, sc.Items)
			}
			releaseParts(s)
		}
	})
}
