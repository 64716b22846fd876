package process

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

// vendorList is a tracestate of n members named prefix0, prefix1, ..., whose values are runs
// of x sized so that the whole list is size bytes long.
func vendorList(prefix string, n, size int) string {
	keys := make([]string, n)
	fixed := n - 1 // commas
	for i := range keys {
		keys[i] = fmt.Sprint(prefix, i, "=")
		fixed += len(keys[i])
	}
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		v := (size - fixed) / n
		if i < (size-fixed)%n {
			v++
		}
		b.WriteString(k + strings.Repeat("x", v))
	}
	if b.Len() != size {
		panic(fmt.Sprintf("vendorList(%q, %d, %d) is %d bytes", prefix, n, size, b.Len()))
	}
	return b.String()
}

// A kept span's threshold always fits in its tracestate: the ot member leads, and what would
// take the list past what the next reader accepts (1024 bytes, 31 members, an ot value of
// 256 bytes) is left out as W3C Trace Context says: members over 128 bytes first, then from the
// right; the ot member's other values from the right. Each value left out is counted. A
// tracestate already past a limit on arrival does not parse and fails closed.
func TestTracestateMakesRoom(t *testing.T) {
	tid := mustTID("fefefefefefefefefe80000000000000") // randomness 0x80000000000000: th:8 at 50%
	at1020 := vendorList("k", 12, 1020)
	members := strings.Split(at1020, ",")
	big := "big=" + strings.Repeat("y", 200)
	afterBig := vendorList("k", 10, 1020-len(big)-1)
	ones := "aa:" + strings.Repeat("1", 120)
	otValue := ones + ";bb:" + strings.Repeat("2", 129) // 256 bytes
	for _, v := range []struct {
		name      string
		ts        string
		want      string
		omitted   int
		equalOnly bool
	}{
		{"fits", vendorList("k", 4, 1000), "ot=th:8," + vendorList("k", 4, 1000), 0, false},
		{"1016 bytes: fits exactly", vendorList("k", 12, 1016), "ot=th:8," + vendorList("k", 12, 1016), 0, false},
		{"1020 bytes: the last member goes", at1020, "ot=th:8," + strings.Join(members[:11], ","), 1, false},
		{"1024 bytes", vendorList("k", 12, 1024), "ot=th:8," + strings.Join(strings.Split(vendorList("k", 12, 1024), ",")[:11], ","), 1, false},
		{"a member over 128 bytes goes first", big + "," + afterBig, "ot=th:8," + afterBig, 1, false},
		{"31 members: the last goes", vendorList("k", 31, 200), "ot=th:8," + strings.Join(strings.Split(vendorList("k", 31, 200), ",")[:30], ","), 1, false},
		{"31 members with ot among them", "a=1,ot=th:0," + vendorList("k", 29, 200),
			"ot=th:8,a=1," + vendorList("k", 29, 200), 0, false},
		{"ot value of 256 bytes", "ot=" + otValue + ",z=1", "ot=th:8;" + ones + ",z=1", 1, false},
		{"ot value of 256 bytes with rv", "ot=rv:80000000000000;" + otValue[:256-len("rv:80000000000000;")],
			"ot=rv:80000000000000;th:8;" + ones, 1, false},
		{"ot value and list at their limits", "ot=" + otValue + "," + vendorList("k", 30, 1024-260),
			"ot=th:8;" + ones + "," + vendorList("k", 30, 1024-260), 1, false},
		// An equal arriving threshold, laid out as written: the span passes as it came.
		{"at the limit, already written", "ot=th:8," + vendorList("k", 30, 1016), "ot=th:8," + vendorList("k", 30, 1016), 0, true},
		{"past the limit on arrival", vendorList("k", 12, 1025), "", 0, false},
		{"32 members on arrival", vendorList("k", 32, 300), "", 0, false},
	} {
		for _, mode := range []SampleMode{SampleEqualizing, SampleProportional} {
			if v.equalOnly && mode != SampleEqualizing {
				continue
			}
			t.Run(fmt.Sprint(mode, "/", v.name), func(t *testing.T) {
				before := testutil.ToFloat64(tracestateOmitted)
				kept, got := sampleSpan(t, SampleConfig{Mode: mode, Percent: 50}, tid, v.ts, "", nil)
				if kept != (v.want != "") || got != v.want {
					t.Errorf("kept %v with\n%q (%d bytes), want\n%q (%d bytes)", kept, got, len(got), v.want, len(v.want))
				}
				if d := testutil.ToFloat64(tracestateOmitted) - before; d != float64(v.omitted) {
					t.Errorf("otlpgate_process_tracestate_values_omitted_total rose by %v, want %d", d, v.omitted)
				}
				var st traceState
				if kept && !parseTraceState([]byte(got), &st) {
					t.Errorf("the tracestate written does not parse")
				}
				if v.want == "" {
					if kept, got := sampleSpan(t, SampleConfig{Mode: mode, Percent: 50}, tid, v.ts, "sampling.priority", 1); !kept || got != v.ts {
						t.Errorf("sampling.priority 1: kept %v with a tracestate of %d bytes, want it as it came", kept, len(got))
					}
				}
			})
		}
	}
}

// Two tiers in a row, each sampling at 30% in the same mode, given 100 spans whose tracestates
// sit at the limits a reader accepts, or past them: every tracestate the first writes is one
// the second accepts, so the second keeps exactly what its mode says of what the first kept
// (in equalizing mode all of it, byte for byte; in proportional mode at 30% of 30%, the
// threshold multiplied), and the spans that arrived past a limit are dropped by the first
// (fail closed) and never reach the second.
func TestConsistentTiersAgreeAtTracestateLimit(t *testing.T) {
	in, wantKept := limitRequest(t)
	for _, mode := range []SampleMode{SampleEqualizing, SampleProportional} {
		t.Run(mode.String(), func(t *testing.T) {
			sc := SampleConfig{On: true, Mode: mode, Percent: 30}
			first, _ := apply(t, mustChain(t, Config{Sample: sc}), fastpath.Traces, in)
			second, _ := apply(t, mustChain(t, Config{Sample: sc}), fastpath.Traces, first)
			tier1, tier2 := spansByID(t, first), spansByID(t, second)
			if len(tier1) != len(wantKept) {
				t.Errorf("the first tier kept %d spans, want %d", len(tier1), len(wantKept))
			}
			for id := range wantKept {
				if _, ok := tier1[id]; !ok {
					t.Errorf("span %x: dropped by the first tier", id)
				}
			}
			for id, ts := range tier1 {
				var st1, st2 traceState
				if !parseTraceState([]byte(ts), &st1) {
					t.Errorf("span %x: the first tier wrote a tracestate that does not parse (%d bytes)", id, len(ts))
				}
				got, ok := tier2[id]
				switch {
				case !ok:
					t.Errorf("span %x: the first tier kept it with a tracestate of %d bytes; the second dropped it", id, len(ts))
				case !parseTraceState([]byte(got), &st2):
					t.Errorf("span %x: the second tier wrote a tracestate that does not parse (%d bytes)", id, len(got))
				case mode == SampleEqualizing && got != ts:
					t.Errorf("span %x: the second tier rewrote its tracestate", id)
				case mode == SampleProportional && st2.thr <= st1.thr:
					t.Errorf("span %x: th %s after th %s: not multiplied again", id, st2.th, st1.th)
				}
			}
			if len(tier2) != len(tier1) {
				t.Errorf("the second tier passed %d spans of the %d the first kept", len(tier2), len(tier1))
			}
			if mode == SampleEqualizing && string(second) != string(first) {
				t.Error("the second tier rewrote what the first kept")
			}
		})
	}
}

// limitRequest is 100 spans whose tracestates sit at the limits a reader accepts (1020 and 1024
// bytes, 31 members, an ot value of 256 bytes, a member over 128 bytes) or past them, most with
// the highest randomness, and which of them a consistent sampler at any rate keeps.
func limitRequest(tb testing.TB) ([]byte, map[pcommon.SpanID]bool) {
	shapes := []struct {
		ts    string
		parse bool
	}{
		{vendorList("k", 12, 1020), true},
		{vendorList("k", 12, 1024), true},
		{"ot=th:8," + vendorList("k", 12, 1016), true},
		{"ot=rv:ffffffffffffff;th:4," + vendorList("k", 30, 997), true},
		{vendorList("k", 31, 400), true},
		{"ot=aa:" + strings.Repeat("1", 120) + ";bb:" + strings.Repeat("2", 129) + "," + vendorList("k", 4, 500), true},
		{"big=" + strings.Repeat("y", 200) + "," + vendorList("k", 8, 819), true},
		{vendorList("k", 12, 1025), false},
		{vendorList("k", 32, 400), false},
		{"ot=aa:" + strings.Repeat("1", 254), false}, // an ot value of 257 bytes
	}
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	wantKept := map[pcommon.SpanID]bool{}
	for i := range 100 {
		sh := shapes[i%len(shapes)]
		sp := ss.Spans().AppendEmpty()
		// The highest randomness, which every threshold but never keeps; every seventh span
		// the lowest, which only 100% keeps (but where an rv gives the highest).
		tid := pcommon.TraceID{byte(i), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		low := i%7 == 6
		if low {
			tid = pcommon.TraceID{byte(i), 1}
		}
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{1, byte(i)})
		sp.SetName("tiered")
		sp.TraceState().FromRaw(sh.ts)
		if sh.parse && (!low || strings.Contains(sh.ts, "rv:")) {
			wantKept[sp.SpanID()] = true
		}
	}
	return marshalTraces(tb, td), wantKept
}

// spansByID reads a request body as the Collector's decoder does: each span's tracestate by
// span id.
func spansByID(t testing.TB, b []byte) map[pcommon.SpanID]string {
	t.Helper()
	out := map[pcommon.SpanID]string{}
	if len(b) == 0 {
		return out
	}
	td := unmarshalTraces(t, b)
	for i := range td.ResourceSpans().Len() {
		sss := td.ResourceSpans().At(i).ScopeSpans()
		for j := range sss.Len() {
			sps := sss.At(j).Spans()
			for k := range sps.Len() {
				out[sps.At(k).SpanID()] = sps.At(k).TraceState().AsRaw()
			}
		}
	}
	return out
}
