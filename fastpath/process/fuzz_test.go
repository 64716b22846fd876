package process

import (
	"encoding/binary"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

// FuzzAppendEntry feeds arbitrary entries to every step at once, with hash_seed and with
// proportional sampling (which rewrites trace_states): nothing panics, the entry grows by no
// more than the chain's Slack, and whatever the Collector's decoder reads on the way in, it
// reads on the way out, with no more spans.
func FuzzAppendEntry(f *testing.F) {
	req := benchRequest(f, 2)
	for _, r := range [][]byte{req, tieredRequest(f, SampleProportional, 50)} {
		for off := 0; off < len(r); {
			fl, err := next(r, off)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(r[fl.val:fl.end])
			off = fl.end
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00, 0x12, 0x00})
	// A ScopeSpans holding a span with a trace id and a trace_state to rewrite.
	span := append(appendHeader(nil, 1, 16), make([]byte, 15)...)
	span = append(span, 0xff)
	span = append(appendHeader(span, 3, 22), " ot=q:1;th:8, vendor=x"...)
	scope := append(appendHeader(nil, 2, len(span)), span...)
	f.Add(append(appendHeader(nil, 2, len(scope)), scope...))
	all := stepConfigs[len(stepConfigs)-1].cfg
	proportional := all
	proportional.Sample = SampleConfig{On: true, Mode: SampleProportional, Percent: 50, Precision: 3}
	chains := []*Chain{mustChain(f, all), mustChain(f, proportional)}
	f.Fuzz(func(t *testing.T, entry []byte) {
		in := appendHeader(nil, 1, len(entry))
		in = append(in, entry...)
		for _, c := range chains {
			out, tally, err := c.AppendEntry(nil, fastpath.Traces, entry, benchPeer)
			removed := int(tally[tRemoved])
			if err != nil {
				continue
			}
			if room := len(entry) + c.Slack(fastpath.Traces, len(entry)) + 1 + binary.MaxVarintLen64; len(out) > room {
				t.Fatalf("%d bytes out of %d, more than the %d the slack allows", len(out), len(entry), room)
			}
			before, errIn := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(in)
			if errIn != nil {
				continue
			}
			after, errOut := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(out)
			if errOut != nil {
				t.Fatalf("the decoder reads the input but not the output: %v\nin  % x\nout % x", errOut, in, out)
			}
			if after.SpanCount()+removed != before.SpanCount() {
				t.Fatalf("%d spans in, %d out, %d removed", before.SpanCount(), after.SpanCount(), removed)
			}
		}
	})
}

// FuzzTraceState: a tracestate that parses is written, with any threshold, as one that parses
// again to the same rv and th, within the limits it was read with, with nothing left out of one
// that fits and nothing added but the threshold; none that does not parse is ever written.
func FuzzTraceState(f *testing.F) {
	for _, s := range []string{"", "ot=th:8", "vendor=x, ot=rv:c0000000000000;th:8;q:r ,,a@b=1", "ot=th:4,ot=q:1", "Vendor=x", "ot=th:8;",
		// At the limits: 1020 and 1024 bytes, 31 members, an ot value of 256 bytes, a member
		// over 128 bytes.
		vendorList("k", 12, 1020), vendorList("k", 12, 1024), vendorList("k", 31, 300), " ot=th:8 , " + vendorList("k", 30, 1000),
		"ot=rv:c0000000000000;aa:" + strings.Repeat("1", 120) + ";bb:" + strings.Repeat("2", 111) + ",z=1",
		"a=1,big=" + strings.Repeat("y", 200) + "," + vendorList("k", 10, 800)} {
		f.Add([]byte(s), uint64(0x80000000000000))
	}
	f.Fuzz(func(t *testing.T, ts []byte, th uint64) {
		th &= maxRandomness
		var st traceState
		if !parseTraceState(ts, &st) {
			return
		}
		tv := appendTValue(nil, th)
		out, omitted := appendTraceState(nil, ts, &st, tv)
		// At most "ot=", "th:", 14 digits and a separator are added.
		if len(out) > len(ts)+21 || len(out) > maxTracestate {
			t.Fatalf("%q grew to %q", ts, out)
		}
		var again traceState
		if !parseTraceState(out, &again) {
			t.Fatalf("%q was written as %q, which does not parse", ts, out)
		}
		if string(again.rv) != string(st.rv) || string(again.th) != string(tv) || again.thr != th {
			t.Fatalf("%q was written as %q: rv %q th %q, want %q %q", ts, out, again.rv, again.th, st.rv, tv)
		}
		// Every value left out is counted; from a tracestate with room for ot=th:... (at most
		// 21 bytes, 18 of them in the ot value, and one member), none is.
		in, kept := values(ts), values(out)
		if len(in)-len(kept) != omitted {
			t.Fatalf("%q was written as %q: %d values left out, %d counted", ts, out, len(in)-len(kept), omitted)
		}
		members := 0
		for _, m := range strings.Split(string(ts), ",") {
			if m = strings.Trim(m, " \t"); m != "" && !strings.HasPrefix(m, "ot=") {
				members++
			}
		}
		if omitted > 0 && len(ts)+21 <= maxTracestate && members+1 <= maxWrittenMembers && len(st.ot)+18 <= maxOTelValue {
			t.Fatalf("%q was written as %q: %d values left out of one with room", ts, out, omitted)
		}
	})
}

// values lists the non-empty members of a tracestate other than ot, and the sub-keys of its
// last ot member other than rv and th.
func values(ts []byte) []string {
	var out []string
	ot := ""
	for _, m := range strings.Split(string(ts), ",") {
		m = strings.Trim(m, " \t")
		switch {
		case m == "":
		case strings.HasPrefix(m, "ot="):
			ot = m[3:]
		default:
			out = append(out, m)
		}
	}
	for _, v := range strings.Split(ot, ";") {
		if v != "" && !strings.HasPrefix(v, "rv:") && !strings.HasPrefix(v, "th:") {
			out = append(out, v)
		}
	}
	return out
}
