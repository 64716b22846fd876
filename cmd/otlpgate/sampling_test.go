package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// At -sample.traces=30 -sample.precision=3 the rejection threshold is 0.7 of the 2^56
// randomness values, 0xb333..., rounded to three hex digits: b33.
const consistent30 = 0xb33 << 44

// randomness is the low 56 bits of a trace id, which consistent sampling compares.
func randomness(tid [16]byte) uint64 { return binary.BigEndian.Uint64(tid[8:]) & (1<<56 - 1) }

// The real binary in proportional mode with -sample.logs, fed by the OpenTelemetry Go SDK
// (traces over gRPC, logs in those traces over HTTP) and by a hand-made request whose spans
// carry other vendors' tracestate members, an arriving threshold, an rv, or a tracestate that
// does not parse: what the upstream's pdata reads holds every trace complete or not at all,
// exactly the traces whose randomness reaches the threshold, each span's tracestate with the
// threshold combined as the Collector combines it, the logs of the kept traces and the log
// without a trace id; what was left out is counted.
func TestBinaryConsistentSampling(t *testing.T) {
	bin := buildBinary(t)
	up := startUpstream(t)
	g := startGateway(t, bin, "-batch.max-age", "10ms",
		"-dest", "name=up,endpoint="+up.Addr()+",protocol=v1,mode=unary,retry-initial=20ms",
		"-sample.traces", "30", "-sample.mode", "proportional", "-sample.precision", "3", "-sample.logs")
	httpAddr := g.http
	waitReady(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(g.grpcAddr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))))
	lexp, err := otlploghttp.New(ctx, otlploghttp.WithEndpoint(httpAddr), otlploghttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(lexp)),
		sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))))
	const traces = 60
	keptTraces := map[pcommon.TraceID]bool{}
	for range traces {
		pctx, parent := tp.Tracer("t").Start(ctx, "parent")
		for range 2 {
			_, child := tp.Tracer("t").Start(pctx, "child")
			child.End()
		}
		var rec otellog.Record
		rec.SetBody(attribute.StringValue("in a trace"))
		lp.Logger("t").Emit(pctx, rec) // carries the trace id of pctx
		parent.End()
		if tid := parent.SpanContext().TraceID(); randomness(tid) >= consistent30 {
			keptTraces[pcommon.TraceID(tid)] = true
		}
	}
	var rec otellog.Record
	rec.SetBody(attribute.StringValue("no trace"))
	lp.Logger("t").Emit(context.Background(), rec)
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if len(keptTraces) == 0 || len(keptTraces) == traces {
		t.Fatalf("%d of %d traces kept: the test says nothing", len(keptTraces), traces)
	}

	// Hand-made spans, one per trace id of the form {0xbb, i, ...}, with their tracestate and
	// what the upstream must read (empty: dropped). The randomness is given by rv or by the
	// trace id's last seven bytes.
	high := [7]byte{0xf0} // randomness 0xf0..., kept at 30% and at 15%
	hand := []struct {
		low       [7]byte
		ts, prio  string
		wantTS    string
		wantTrace bool
	}{
		{high, "vendor=x", "", "ot=th:b33,vendor=x", true},
		{high, " a=1 , ot=p:8;q:r, b@c=2", "", "ot=th:b33;p:8;q:r,a=1,b@c=2", true},
		// Sampled at 50% upstream: proportional mode keeps 30% of that, 0.15, threshold
		// 0.85 = 0xd999..., rounded to d9a.
		{[7]byte{}, "ot=th:8;rv:e0000000000000", "", "ot=rv:e0000000000000;th:d9a", true},
		{[7]byte{}, "ot=th:8;rv:d9000000000000", "", "", false},
		{[7]byte{0xb3, 0x20}, "", "", "", false}, // just below the threshold
		{[7]byte{0xb3, 0x30}, "", "", "ot=th:b33", true},
		{high, "Vendor=x", "", "", false},         // does not parse: fails closed
		{high, "Vendor=x", "1", "Vendor=x", true}, // unless sampling.priority keeps it, untouched
		{[7]byte{}, "", "0", "", false},
	}
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i, h := range hand {
		sp := ss.Spans().AppendEmpty()
		tid := pcommon.TraceID{0xbb, byte(i)}
		copy(tid[9:], h.low[:])
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
		sp.SetName("hand")
		sp.TraceState().FromRaw(h.ts)
		if h.prio != "" {
			sp.Attributes().PutStr("sampling.priority", h.prio)
		}
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+httpAddr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP/HTTP: %d", resp.StatusCode)
	}
	handKept := 0
	for _, h := range hand {
		if h.wantTrace {
			handKept++
		}
	}

	wantSpans, wantLogs := 3*len(keptTraces)+handKept, len(keptTraces)+1
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, c := range up.Spans() {
			n += c
		}
		nlogs := 0
		for _, ld := range up.Logs() {
			nlogs += ld.LogRecordCount()
		}
		if n >= wantSpans && nlogs >= wantLogs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream has %d spans and %d log records, want %d and %d:\n%s", n, nlogs, wantSpans, wantLogs, g.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	byTrace := map[pcommon.TraceID]int{}
	gotHand := map[byte]string{}
	for _, td := range up.Traces() {
		for i := range td.ResourceSpans().Len() {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := range sss.Len() {
				sps := sss.At(j).Spans()
				for k := range sps.Len() {
					sp := sps.At(k)
					tid := sp.TraceID()
					if tid[0] == 0xbb && tid[2] == 0 && tid[8] == 0 && sp.Name() == "hand" {
						gotHand[tid[1]] = sp.TraceState().AsRaw()
						continue
					}
					byTrace[tid]++
					if ts := sp.TraceState().AsRaw(); ts != "ot=th:b33" {
						t.Errorf("SDK span of trace %x: tracestate %q, want ot=th:b33", tid, ts)
					}
				}
			}
		}
	}
	for tid, n := range byTrace {
		switch {
		case !keptTraces[tid]:
			t.Errorf("trace %x arrived; its randomness %x is below the threshold", tid, randomness(tid))
		case n != 3:
			t.Errorf("trace %x: %d of its 3 spans", tid, n)
		}
	}
	for tid := range keptTraces {
		if byTrace[tid] == 0 {
			t.Errorf("trace %x missing", tid)
		}
	}
	for i, h := range hand {
		got, ok := gotHand[byte(i)]
		if ok != h.wantTrace || got != h.wantTS {
			t.Errorf("hand-made span %d (%q): arrived %v with %q, want %v with %q", i, h.ts, ok, got, h.wantTrace, h.wantTS)
		}
	}
	logs := 0
	for _, ld := range up.Logs() {
		for i := range ld.ResourceLogs().Len() {
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := range sls.Len() {
				lrs := sls.At(j).LogRecords()
				for k := range lrs.Len() {
					lr := lrs.At(k)
					logs++
					switch tid := lr.TraceID(); {
					case tid.IsEmpty():
						if lr.Body().Str() != "no trace" {
							t.Errorf("log record %q without a trace id", lr.Body().Str())
						}
					case !keptTraces[tid]:
						t.Errorf("log record of dropped trace %x arrived", tid)
					}
				}
			}
		}
	}
	if logs != wantLogs {
		t.Errorf("%d log records, want %d", logs, wantLogs)
	}
	handOut := len(hand) - handKept
	if got := scrape(t, g.admin, "otlpgate_process_sampled_out_spans_total"); got != float64(3*(traces-len(keptTraces))+handOut) {
		t.Errorf("otlpgate_process_sampled_out_spans_total = %v, want %d", got, 3*(traces-len(keptTraces))+handOut)
	}
	if got := scrape(t, g.admin, "otlpgate_process_sampled_out_log_records_total"); got != float64(traces-len(keptTraces)) {
		t.Errorf("otlpgate_process_sampled_out_log_records_total = %v, want %d", got, traces-len(keptTraces))
	}
	if got := scrape(t, g.admin, "otlpgate_process_sampled_kept_log_records_total"); got != float64(wantLogs) {
		t.Errorf("otlpgate_process_sampled_kept_log_records_total = %v, want %d", got, wantLogs)
	}
}

// vendorMembers is a tracestate of n members k0, k1, ... whose values are runs of x sized so
// that the whole list is size bytes long.
func vendorMembers(n, size int) string {
	keys, fixed := make([]string, n), n-1
	for i := range keys {
		keys[i] = fmt.Sprint("k", i, "=")
		fixed += len(keys[i])
	}
	members := make([]string, n)
	for i, k := range keys {
		v := (size - fixed) / n
		if i < (size-fixed)%n {
			v++
		}
		members[i] = k + strings.Repeat("x", v)
	}
	return strings.Join(members, ",")
}

// Two otlpgates in a row, each sampling in equalizing mode at 30%, the second sending to an
// upstream that decodes with the Collector's pdata. The first is given 100 spans whose
// tracestates sit at the limits a reader accepts (1020 and 1013 bytes, 31 members), or past
// them (1025 bytes). The first keeps the spans whose randomness reaches the threshold and whose
// tracestate parses (or whose sampling.priority keeps them), and writes the threshold into
// each, leaving out what does not fit as W3C Trace Context says (from the right); the second,
// at the same rate, passes exactly what the first kept, as the first wrote it. Before, the
// first wrote tracestates of 1031 bytes, which the second refused: it dropped every such span.
func TestBinaryTiersAgreeAtTracestateLimit(t *testing.T) {
	bin := buildBinary(t)
	up := startUpstream(t)
	sample := []string{"-batch.max-age", "10ms", "-sample.traces", "30", "-sample.mode", "equalizing"}
	second := startGateway(t, bin, append(sample, "-http.listen", "",
		"-dest", "name=up,endpoint="+up.Addr()+",protocol=v1,mode=unary,retry-initial=20ms")...)
	first := startGateway(t, bin, append(sample,
		"-dest", "name=next,endpoint="+second.grpcAddr+",protocol=v1,mode=unary,retry-initial=20ms")...)
	waitReady(t, second)
	waitReady(t, first)

	at1020, at31 := vendorMembers(12, 1020), vendorMembers(31, 300)
	shapes := []struct {
		ts, prio string
		want     string // the tracestate that arrives upstream; empty: dropped by the first tier
		omitted  int
	}{
		{at1020, "", "ot=th:b333," + strings.Join(strings.Split(at1020, ",")[:11], ","), 1},
		{vendorMembers(12, 1013), "", "ot=th:b333," + vendorMembers(12, 1013), 0}, // 1024 bytes with the threshold
		{at31, "", "ot=th:b333," + strings.Join(strings.Split(at31, ",")[:30], ","), 1},
		{"ot=th:b333," + vendorMembers(30, 1013), "", "ot=th:b333," + vendorMembers(30, 1013), 0},
		{vendorMembers(12, 1025), "", "", 0},
		{vendorMembers(12, 1025), "1", vendorMembers(12, 1025), 0}, // kept by its priority, untouched
	}
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	want := map[pcommon.SpanID]string{}
	wantOmitted, wantOut := 0, 0
	for i := range 100 {
		sh := shapes[i%len(shapes)]
		sp := ss.Spans().AppendEmpty()
		// The highest randomness, kept at any rate; every seventh span the lowest, dropped
		// unless its priority keeps it.
		tid := pcommon.TraceID{0xcc, byte(i), 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		low := i%7 == 6
		if low {
			tid = pcommon.TraceID{0xcc, byte(i), 1}
		}
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{0xcc, byte(i)})
		sp.SetName("tiered")
		sp.TraceState().FromRaw(sh.ts)
		if sh.prio != "" {
			sp.Attributes().PutStr("sampling.priority", sh.prio)
		}
		switch {
		case sh.prio == "" && (low || sh.want == ""):
			wantOut++
		case sh.prio != "" && low:
			want[sp.SpanID()] = sh.ts
		default:
			want[sp.SpanID()] = sh.want
			wantOmitted += sh.omitted
		}
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+first.http+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP/HTTP: %d", resp.StatusCode)
	}
	if len(want) == 0 || wantOut == 0 || wantOmitted == 0 {
		t.Fatalf("%d spans to arrive, %d to be dropped, %d values to leave out: the test says nothing", len(want), wantOut, wantOmitted)
	}

	// Every span the first tier kept leaves the second too, so the counters of both settle
	// once the first has counted 100 spans and the second as many as the first kept.
	testkit.WaitFor(t, "both tiers to sample every span", func() bool {
		return scrape(t, first.admin, "otlpgate_process_sampled_kept_spans_total")+scrape(t, first.admin, "otlpgate_process_sampled_out_spans_total") == 100 &&
			scrape(t, second.admin, "otlpgate_process_sampled_kept_spans_total")+scrape(t, second.admin, "otlpgate_process_sampled_out_spans_total") ==
				scrape(t, first.admin, "otlpgate_process_sampled_kept_spans_total")
	})
	testkit.WaitFor(t, "the upstream to receive what the second tier kept", func() bool {
		n := 0
		for _, c := range up.Spans() {
			n += c
		}
		return n >= int(scrape(t, second.admin, "otlpgate_process_sampled_kept_spans_total"))
	})

	got := map[pcommon.SpanID]string{}
	for _, td := range up.Traces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if _, dup := got[sp.SpanID()]; dup {
						t.Errorf("span %v arrived twice", sp.SpanID())
					}
					got[sp.SpanID()] = sp.TraceState().AsRaw()
				}
			}
		}
	}
	for id, ts := range want {
		switch g, ok := got[id]; {
		case !ok:
			t.Errorf("span %v missing upstream (want it with a tracestate of %d bytes)", id, len(ts))
		case g != ts:
			t.Errorf("span %v arrived with a tracestate of %d bytes:\n%q\nwant %d:\n%q", id, len(g), g, len(ts), ts)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("span %v arrived; the first tier should have dropped it", id)
		}
	}
	for _, c := range []struct {
		g      *gateway
		metric string
		want   int
	}{
		{first, "otlpgate_process_sampled_out_spans_total", wantOut},
		{first, "otlpgate_process_sampled_kept_spans_total", len(want)},
		{first, "otlpgate_process_tracestate_values_omitted_total", wantOmitted},
		{second, "otlpgate_process_sampled_out_spans_total", 0},
		{second, "otlpgate_process_sampled_kept_spans_total", len(want)},
		{second, "otlpgate_process_tracestate_values_omitted_total", 0},
	} {
		tier := "first"
		if c.g == second {
			tier = "second"
		}
		if got := scrape(t, c.g.admin, c.metric); got != float64(c.want) {
			t.Errorf("%s tier: %s = %v, want %d", tier, c.metric, got, c.want)
		}
	}
}
