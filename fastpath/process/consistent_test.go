package process

import (
	"bytes"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

func tvalue(th uint64) string { return string(appendTValue(nil, th)) }

// The Collector's pkg/sampling tests of ProbabilityToThresholdWithPrecision and its examples,
// copied as facts: probabilities and the th values they give at each precision.
func TestThresholdCollectorVectors(t *testing.T) {
	f := func(p float64, precision int, want string) {
		t.Helper()
		th, ok := thresholdFor(p, precision)
		if got := tvalue(th); !ok || got != want {
			t.Errorf("probability %v precision %d: th %q (%v), the Collector's %q", p, precision, got, ok, want)
		}
	}
	for _, c := range []struct {
		p       float64
		exact   string
		rounded []string
	}{
		{1 - 0x456789ap-28, "456789a", []string{"45678a", "45679", "4568", "456", "45", "4"}},
		{1 - 0x456789ap-40, "000456789a", []string{"00045678a", "00045679", "0004568", "000456", "00045", "0004"}},
		{1 - 0x789abcdefp-40, "0789abcdef", []string{"0789abcdef", "0789abcdf", "0789abce", "0789abd", "0789ac", "0789b", "078a", "079", "08"}},
		{1 - 0x12345678p-32, "12345678", []string{"1234568", "123456", "12345", "1234", "123", "12", "1"}},
		{1 - 0x80801p-28, "0080801", []string{"00808", "008"}},
		{1, "0", []string{"0"}},
	} {
		f(c.p, 14, c.exact)
		for _, r := range c.rounded {
			// The precision asked for does not count the leading zeros.
			f(c.p, len(strings.TrimLeft(r, "0")), r)
		}
	}
	// ExampleProbabilityToThresholdWithPrecision: thirds at precision 3.
	f(1.0/3, 3, "aab")
	f(2.0/3, 3, "555")
	f(3.0/3, 3, "0")
	// ExampleProbabilityToThreshold_rounding: a third at full precision.
	f(1.0/3, 14, "aaaaaaaaaaaaac")
	// ExampleProbabilityToThreshold_limitedprecision.
	down := func(x float64, n int) float64 {
		for range n {
			x = math.Nextafter(x, 0)
		}
		return x
	}
	for _, c := range []struct {
		p    float64
		want []string
	}{
		{15.0 / 16, []string{"1", "10000000000008", "1000000000001", "10000000000018"}},
		{8.0 / 16, []string{"8", "80000000000004", "80000000000008", "8000000000000c"}},
		{4.0 / 16, []string{"c", "c0000000000002", "c0000000000004", "c0000000000006"}},
		{2.0 / 16, []string{"e", "e0000000000001", "e0000000000002", "e0000000000003"}},
		{1.0 / 16, []string{"f", "f", "f0000000000001", "f0000000000001"}},
	} {
		for n, want := range c.want {
			f(down(c.p, n), 14, want)
		}
	}
	// ExampleProbabilityToThreshold_verysmall, at precision 3.
	for i, want := range []string{"ffffffffffffff", "fffffffffffffe", "fffffffffffffd", "fffffffffffffc", "fffffffffffff8", "fffffffffffff"} {
		f([]float64{0x1p-56, 0x2p-56, 0x3p-56, 0x4p-56, 0x8p-56, 0x10p-56}[i], 3, want)
	}
	if _, ok := thresholdFor(0x1p-57, 4); ok {
		t.Error("a probability below 2^-56 has a threshold")
	}
}

// sampleSpan runs a one-span request with the given trace id, tracestate and attribute through
// a chain sampling with sc, and returns whether the span was kept and the tracestate it left
// with, as the Collector's decoder reads them.
func sampleSpan(t testing.TB, sc SampleConfig, tid pcommon.TraceID, ts, key string, value any) (bool, string) {
	t.Helper()
	sc.On = true
	c := mustChain(t, Config{Sample: sc})
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.TraceState().FromRaw(ts)
	sp.SetTraceID(tid)
	sp.SetSpanID(pcommon.SpanID{0, 0, 0, 0, 0xfe, 0xfe, 0xfe, 0xfe})
	switch v := value.(type) {
	case int:
		sp.Attributes().PutInt(key, int64(v))
	case float64:
		sp.Attributes().PutDouble(key, v)
	case string:
		sp.Attributes().PutStr(key, v)
	}
	out, removed := apply(t, c, fastpath.Traces, marshalTraces(t, td))
	got := unmarshalTraces(t, out)
	switch n := got.SpanCount(); {
	case n == 0 && removed == 1 && len(out) == 0:
		return false, ""
	case n != 1 || removed != 0:
		t.Fatalf("%d spans out, %d removed", n, removed)
	}
	kept := got.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	want := ptrace.NewSpan()
	sp.CopyTo(want)
	want.TraceState().FromRaw(kept.TraceState().AsRaw())
	if kept.SpanID() != want.SpanID() || kept.TraceID() != want.TraceID() || kept.Attributes().Len() != want.Attributes().Len() {
		t.Fatalf("the kept span changed beyond its tracestate")
	}
	return true, kept.TraceState().AsRaw()
}

// The Collector's Test_tracesamplerprocessor_TraceState, copied as facts: trace ids,
// percentages, precisions and arriving tracestates, and for each mode whether the span is kept
// and the tracestate it leaves with. Its precision 0 (full) is 14 here.
func TestConsistentCollectorVectors(t *testing.T) {
	defaultTID := mustTID("fefefefefefefefefe80000000000000")    // kept at 50%, not at 49%
	improbableTID := mustTID("111111111111111111ffffffffffffff") // kept at every probability
	type want struct {
		kept bool
		ts   string
	}
	for _, v := range []struct {
		name         string
		tid          pcommon.TraceID
		pct          float32
		precision    int
		ts           string
		key          string
		value        any
		equalizing   want
		proportional want
	}{
		{"100 percent", defaultTID, 100, 14, "", "", nil, want{true, "ot=th:0"}, want{true, "ot=th:0"}},
		{"50 percent sampled", defaultTID, 50, 14, "", "", nil, want{true, "ot=th:8"}, want{true, "ot=th:8"}},
		{"25 percent sampled", mustTID("ddddddddddddddddddc0000000000000"), 25, 14, "", "", nil, want{true, "ot=th:c"}, want{true, "ot=th:c"}},
		{"25 percent unsampled", mustTID("ddddddddddddddddddb0000000000000"), 25, 14, "", "", nil, want{}, want{}},
		{"1 percent sampled", defaultTID, 1, 14, "ot=rv:FD70A3D70A3D71", "", nil,
			want{true, "ot=rv:FD70A3D70A3D71;th:fd70a3d70a3d71"}, want{true, "ot=rv:FD70A3D70A3D71;th:fd70a3d70a3d71"}},
		{"1 percent sampled with rvalue and precision 4", defaultTID, 1, 4, "ot=rv:FD70A3D70A3D71", "", nil,
			want{true, "ot=rv:FD70A3D70A3D71;th:fd70a"}, want{true, "ot=rv:FD70A3D70A3D71;th:fd70a"}},
		{"1 percent sampled with rvalue and precision 3", defaultTID, 1, 3, "ot=rv:FD70A3D70A3D71", "", nil, want{}, want{}},
		{"1 percent not sampled with rvalue", defaultTID, 1, 14, "ot=rv:FD70A3D70A3D70", "", nil, want{}, want{}},
		{"49 percent not sampled with default tid", defaultTID, 49, 14, "", "", nil, want{}, want{}},
		{"1 percent sampled with rvalue", defaultTID, 1, 14, "ot=rv:fd70B000000000", "", nil,
			want{true, "ot=rv:fd70B000000000;th:fd70a3d70a3d71"}, want{true, "ot=rv:fd70B000000000;th:fd70a3d70a3d71"}},
		{"1 percent sampled with tid", mustTID("a0a0a0a0a0a0a0a0a0fe000000000000"), 1, 4, "", "", nil,
			want{true, "ot=th:fd70a"}, want{true, "ot=th:fd70a"}},
		{"sampled by priority", defaultTID, 1, 14, "", "sampling.priority", 2, want{true, "ot=th:0"}, want{true, "ot=th:0"}},
		{"not sampled by priority", defaultTID, 99, 14, "", "sampling.priority", 0, want{}, want{}},
		{"incoming 50 percent with rvalue", defaultTID, 50, 14, "ot=rv:90000000000000;th:80000000000000", "", nil,
			want{true, "ot=rv:90000000000000;th:8"}, want{}},
		{"incoming 50 percent at 25 percent not sampled", defaultTID, 25, 14, "ot=th:8", "", nil, want{}, want{}},
		{"incoming 50 percent at 25 percent sampled", mustTID("ffffffffffffffffffffffffffffffff"), 25, 14, "ot=th:8", "", nil,
			want{true, "ot=th:c"}, want{true, "ot=th:e"}},
		{"equalizing vs proportional", defaultTID, 50, 14, "ot=rv:c0000000000000;th:8", "", nil,
			want{true, "ot=rv:c0000000000000;th:8"}, want{true, "ot=rv:c0000000000000;th:c"}},
		// The Collector's vector keeps this span with fail_closed off; with it on (its
		// default, and otlpgate's), an inconsistent arriving threshold drops the span, as its
		// Test_tracesamplerprocessor_TraceStateErrors shows.
		{"inconsistent arriving threshold", defaultTID, 100, 14, "ot=rv:40000000000000;th:8", "", nil, want{}, want{}},
		{"inconsistent arriving threshold not sampled", defaultTID, 1, 14, "ot=rv:40000000000000;th:8", "", nil, want{}, want{}},
		{"40 percent precision 3 with rvalue", defaultTID, 40, 3, "ot=rv:a0000000000000", "", nil,
			want{true, "ot=rv:a0000000000000;th:99a"}, want{true, "ot=rv:a0000000000000;th:99a"}},
		{"arriving 50 percent sampled at 40 percent precision 6 with tid", mustTID("a0a0a0a0a0a0a0a0a0d0000000000000"), 40, 6, "ot=th:8", "", nil,
			want{true, "ot=th:99999a"}, want{true, "ot=th:cccccd"}},
		{"arriving 50 percent sampled at 40 percent partly sampled", mustTID("a0a0a0a0a0a0a0a0a0b0000000000000"), 40, 3, "ot=th:8", "", nil,
			want{true, "ot=th:99a"}, want{}},
		{"arriving 50 percent sampled at 40 percent not sampled", mustTID("a0a0a0a0a0a0a0a0a080000000000000"), 40, 3, "ot=th:8", "", nil, want{}, want{}},
		{"tiny probability rounding", improbableTID, 100 * 0x1p-14, 14, "ot=th:fffc", "", nil,
			want{true, "ot=th:fffc"}, want{true, "ot=th:fffffff"}},
		{"almost 100pct sampling", improbableTID, float32((1 - 8e-7) * 100), 10, "", "", nil,
			want{true, "ot=th:00000cccccccd"}, want{true, "ot=th:00000cccccccd"}},
		{"probability underflow", improbableTID, 0x1p-4, 14, "ot=th:fffffffffffff8", "", nil,
			want{true, "ot=th:fffffffffffff8"}, want{}},
	} {
		for _, mode := range []SampleMode{SampleEqualizing, SampleProportional} {
			t.Run(fmt.Sprint(mode, "/", v.name), func(t *testing.T) {
				w := v.equalizing
				if mode == SampleProportional {
					w = v.proportional
				}
				kept, ts := sampleSpan(t, SampleConfig{Mode: mode, Percent: v.pct, Precision: v.precision}, v.tid, v.ts, v.key, v.value)
				if kept != w.kept || ts != w.ts {
					t.Errorf("kept %v with %q, the Collector: %v with %q", kept, ts, w.kept, w.ts)
				}
			})
		}
	}
}

// The Collector's Test_tracesamplerprocessor_TraceStateErrors and
// Test_tracessamplerprocessor_MissingRandomness with fail_closed: every such span is dropped,
// in both consistent modes; the same spans kept by sampling.priority leave with their
// tracestate as it came when it does not parse, and with th:0 added when it does.
func TestConsistentCollectorErrors(t *testing.T) {
	defaultTID := mustTID("fefefefefefefefefe80000000000000")
	for _, v := range []struct {
		name     string
		pct      float32
		tid      pcommon.TraceID
		ts       string
		priority string // the tracestate of the span sampling.priority 1 keeps
	}{
		{"missing randomness", 100, pcommon.TraceID{}, "", "ot=th:0"},
		{"missing randomness at 62", 62, pcommon.TraceID{}, "", "ot=th:0"},
		{"missing randomness at 0", 0, pcommon.TraceID{}, "", "ot=th:0"},
		{"invalid r-value", 100, defaultTID, "ot=rv:abababababababab", "ot=rv:abababababababab"},
		{"invalid t-value", 100, defaultTID, "ot=th:abababababababab", "ot=th:abababababababab"},
		{"t-value syntax", 100, defaultTID, "ot=th:-1", "ot=th:-1"},
		{"inconsistent t-value trace ID", 100, mustTID("ffffffffffffffffff70000000000000"), "ot=th:8", "ot=th:0"},
		{"inconsistent t-value r-value", 100, defaultTID, "ot=th:8;rv:70000000000000", "ot=rv:70000000000000;th:0"},
	} {
		for _, mode := range []SampleMode{SampleEqualizing, SampleProportional} {
			t.Run(fmt.Sprint(mode, "/", v.name), func(t *testing.T) {
				sc := SampleConfig{Mode: mode, Percent: v.pct}
				if kept, ts := sampleSpan(t, sc, v.tid, v.ts, "", nil); kept {
					t.Errorf("kept with %q", ts)
				}
				if kept, ts := sampleSpan(t, sc, v.tid, v.ts, "sampling.priority", 1); !kept || ts != v.priority {
					t.Errorf("sampling.priority 1: kept %v with %q, want %q", kept, ts, v.priority)
				}
			})
		}
	}
}

// The Collector's Test_tracesamplerprocessor_SpanSamplingPriority, in every mode: its span has
// the trace id 01000000000000000000000000000000, whose randomness (0) only 100% keeps.
func TestSamplePriorityEveryMode(t *testing.T) {
	tid := pcommon.TraceID{1}
	for _, v := range []struct {
		pct   float32
		key   string
		value any
		kept  bool
	}{
		{0, "sampling.priority", 2, true},
		{0, "sampling.priority", 1.0, true},
		{0, "sampling.priority", "1", true},
		{100, "sampling.priority", 0, false},
		{100, "sampling.priority", 0.0, false},
		{100, "sampling.priority", "0", false},
		{0, "no.sampling.priority", 2, false},
		{100, "no.sampling.priority", 2, true},
	} {
		for _, mode := range []SampleMode{SampleHashSeed, SampleEqualizing, SampleProportional} {
			kept, ts := sampleSpan(t, SampleConfig{Mode: mode, Percent: v.pct, HashSeed: 4312}, tid, "", v.key, v.value)
			want := ""
			if kept && mode != SampleHashSeed {
				want = "ot=th:0"
			}
			if kept != v.kept || ts != want {
				t.Errorf("%v %v%% %s=%v: kept %v with %q, want %v", mode, v.pct, v.key, v.value, kept, ts, v.kept)
			}
		}
	}
}

// How the threshold joins a tracestate that carries other values: the ot member first, its rv
// before th before its other values, then the other vendors' members in their order, trimmed,
// empty ones left out; a tracestate already in that shape with the same threshold is left as
// it is. These follow the Collector's W3CTraceState.Serialize, within the limits a reader
// accepts (past them, TestTracestateMakesRoom).
func TestConsistentTracestateRewrite(t *testing.T) {
	tid := mustTID("fefefefefefefefefe80000000000000") // randomness 0x80000000000000
	f := func(mode SampleMode, pct float32, ts, want string) {
		t.Helper()
		kept, got := sampleSpan(t, SampleConfig{Mode: mode, Percent: pct}, tid, ts, "", nil)
		if !kept || got != want {
			t.Errorf("%v %v%% %q: kept %v with %q, want %q", mode, pct, ts, kept, got, want)
		}
	}
	for _, mode := range []SampleMode{SampleEqualizing, SampleProportional} {
		f(mode, 50, "vendor=x", "ot=th:8,vendor=x")
		f(mode, 50, " vendor=x , ,ot=p:8;q:r\t, a@b=1 ,", "ot=th:8;p:8;q:r,vendor=x,a@b=1")
		f(mode, 50, "a=1,ot=rv:80000000000000", "ot=rv:80000000000000;th:8,a=1")
		f(mode, 50, "ot=q:1;rv:c0000000000000", "ot=rv:c0000000000000;th:8;q:1")
		// A second ot member replaces the first, th and all.
		f(mode, 50, "ot=th:4,ot=q:1", "ot=th:8;q:1")
	}
	f(SampleEqualizing, 50, "ot=th:8,vendor=x", "ot=th:8,vendor=x")
	f(SampleEqualizing, 50, "ot=th:80", "ot=th:8")
	f(SampleEqualizing, 50, "ot=th:4", "ot=th:8") // a lower arriving threshold is raised
	f(SampleEqualizing, 25, "ot=th:C;rv:ffffffffffffff", "ot=rv:ffffffffffffff;th:c")
	f(SampleEqualizing, 50, "ot=th:C;rv:ffffffffffffff", "ot=rv:ffffffffffffff;th:c") // the stricter arriving one
	f(SampleProportional, 100, "ot=th:8", "ot=th:8")
	f(SampleProportional, 50, "ot=th:4;rv:b0000000000000", "ot=rv:b0000000000000;th:a")
	// At 100% and four digits, an arriving threshold of more digits rounds down: the stricter
	// one it arrived with stays, as it was written.
	f(SampleProportional, 100, "ot=rv:ffffffffffffff;th:8000001C", "ot=rv:ffffffffffffff;th:8000001C")

	// 32 members do not parse: the span fails closed, or keeps its tracestate untouched when
	// sampling.priority keeps it; so does one the W3C syntax refuses.
	for _, ts := range []string{strings.Repeat("k=v,", 31) + "k=v", "Vendor=x", "ot=th:8;", "a=b,ot"} {
		for _, mode := range []SampleMode{SampleEqualizing, SampleProportional} {
			if kept, got := sampleSpan(t, SampleConfig{Mode: mode, Percent: 100}, tid, ts, "", nil); kept {
				t.Errorf("%v %q: kept with %q", mode, ts, got)
			}
			if kept, got := sampleSpan(t, SampleConfig{Mode: mode, Percent: 100}, tid, ts, "sampling.priority", 1); !kept || got != ts {
				t.Errorf("%v %q, sampling.priority 1: kept %v with %q", mode, ts, kept, got)
			}
		}
	}
}

// With -sample.logs, a log record is decided by its trace id as a span of its trace (without
// a tracestate) is, in every mode; a record without a trace id is kept; the records left out
// are counted as log records.
func TestSampleLogsByTraceID(t *testing.T) {
	for _, mode := range []SampleMode{SampleHashSeed, SampleEqualizing, SampleProportional} {
		t.Run(mode.String(), func(t *testing.T) {
			sc := SampleConfig{On: true, Mode: mode, Percent: 30, HashSeed: 7, Logs: true}
			c := mustChain(t, Config{Sample: sc})
			ld := plog.NewLogs()
			for r := range 3 {
				rl := ld.ResourceLogs().AppendEmpty()
				rl.Resource().Attributes().PutInt("r", int64(r))
				for range 2 {
					sl := rl.ScopeLogs().AppendEmpty()
					for i := range 20 {
						lr := sl.LogRecords().AppendEmpty()
						lr.Body().SetStr(fmt.Sprint(r, i))
						if i%5 == 4 {
							continue // no trace id: kept
						}
						var tid pcommon.TraceID
						for j := range tid {
							tid[j] = byte(r*31 + i*7 + j*13 + int(mode))
						}
						lr.SetTraceID(tid)
					}
				}
			}
			want := plog.NewLogs()
			ld.CopyTo(want)
			want.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
				rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
					sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
						if lr.TraceID().IsEmpty() {
							return false
						}
						kept, _ := sampleSpan(t, sc, lr.TraceID(), "", "", nil)
						return !kept
					})
					return sl.LogRecords().Len() == 0
				})
				return rl.ScopeLogs().Len() == 0
			})
			if n := want.LogRecordCount(); n == ld.LogRecordCount() || n <= 3*2*4 {
				t.Fatalf("%d of %d records kept: the test says nothing", n, ld.LogRecordCount())
			}
			outBefore, keptBefore := testutil.ToFloat64(sampledOutLogs), testutil.ToFloat64(sampledKeptLogs)
			spansBefore := testutil.ToFloat64(sampledOutSpans)
			out, removed := apply(t, c, fastpath.Logs, marshalLogs(t, ld))
			if string(out) != string(marshalLogs(t, want)) {
				t.Fatal("the records left differ from those a span of their trace keeps")
			}
			got := unmarshalLogs(t, out)
			if removed != ld.LogRecordCount()-got.LogRecordCount() {
				t.Errorf("removed %d, want %d", removed, ld.LogRecordCount()-got.LogRecordCount())
			}
			if d := testutil.ToFloat64(sampledOutLogs) - outBefore; int(d) != removed {
				t.Errorf("otlpgate_process_sampled_out_log_records_total rose by %v, want %d", d, removed)
			}
			if d := testutil.ToFloat64(sampledKeptLogs) - keptBefore; int(d) != got.LogRecordCount() {
				t.Errorf("otlpgate_process_sampled_kept_log_records_total rose by %v, want %d", d, got.LogRecordCount())
			}
			if testutil.ToFloat64(sampledOutSpans) != spansBefore {
				t.Error("log records were counted as spans")
			}
		})
	}
	// Without -sample.logs, logs pass untouched.
	c := mustChain(t, Config{Sample: SampleConfig{On: true, Percent: 0}})
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().SetTraceID(pcommon.TraceID{1, 2, 3})
	in := marshalLogs(t, ld)
	if out, removed := apply(t, c, fastpath.Logs, in); string(out) != string(in) || removed != 0 {
		t.Error("logs sampled without -sample.logs")
	}
}

// The trace_state a kept span gets goes where an encoder puts it, before the fields numbered
// above 3, whatever the order of the others; a span that carries several trace_state fields
// (the last one counts) leaves with one, in the place of the first.
func TestConsistentTracestateField(t *testing.T) {
	c := mustChain(t, Config{Sample: SampleConfig{On: true, Mode: SampleProportional, Percent: 50}})
	tid := make([]byte, 16)
	tid[9] = 0xc0 // randomness 0xc0..., kept at 50%
	field := func(num protowire.Number, v string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	name, sid, tidF := field(5, "op"), field(2, "\x01\x02\x03\x04\x05\x06\x07\x08"), field(1, string(tid))
	for _, v := range []struct {
		name      string
		span      []byte
		want      []byte
		wantState string
	}{
		{"canonical", cat(tidF, sid, name), cat(tidF, sid, field(3, "ot=th:8"), name), "ot=th:8"},
		{"name first", cat(name, tidF, sid), cat(field(3, "ot=th:8"), name, tidF, sid), "ot=th:8"},
		{"two trace_states", cat(tidF, field(3, "a=1"), sid, field(3, "b=2"), name), cat(tidF, field(3, "ot=th:8,b=2"), sid, name), "ot=th:8,b=2"},
		{"trace_state last", cat(tidF, sid, name, field(3, "b=2")), cat(tidF, sid, name, field(3, "ot=th:8,b=2")), "ot=th:8,b=2"},
	} {
		scope := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), v.span)
		entry := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), scope)
		out, _, err := c.AppendEntry(nil, fastpath.Traces, entry, netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		wantScope := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), v.want)
		wantEntry := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), wantScope)
		want := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), wantEntry)
		if !bytes.Equal(out, want) {
			t.Errorf("%s:\n got % x\nwant % x", v.name, out, want)
		}
		td := unmarshalTraces(t, out)
		if ts := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().AsRaw(); ts != v.wantState {
			t.Errorf("%s: the decoder reads %q", v.name, ts)
		}
	}
}
