package uds

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
)

// nested returns n levels of open, then inner, then the n closes: arrays, objects or both.
func nested(n int, kind, inner string) string {
	var open strings.Builder
	closes := make([]byte, n)
	for i := range n {
		switch {
		case kind == "array", kind == "mixed" && i%2 == 0:
			open.WriteString("[")
			closes[n-1-i] = ']'
		default:
			open.WriteString(`{"k":`)
			closes[n-1-i] = '}'
		}
	}
	return open.String() + inner + string(closes)
}

// TestDeepNesting: span JSON nested 10,000 (and 1,000,000) levels deep, wherever it sits, is
// rejected as malformed, whole, without exhausting the stack; nesting within the limit is kept.
func TestDeepNesting(t *testing.T) {
	for _, depth := range []int{10_000, 1_000_000} {
		for _, kind := range []string{"array", "object", "mixed"} {
			deep := nested(depth, kind, "1")
			unclosed := strings.Repeat("[", depth)
			for _, payload := range []string{
				deep,
				"[" + deep + "]",
				"[" + unclosed,
				"[" + with("attributes", `{"a":`+deep+`}`) + "]",
				"[" + with("attributes", `[`+deep+`]`) + "]",
				"[" + with("links", `[{"traceId":"1","spanId":"2","attributes":{"a":`+deep+`}}]`) + "]",
				"[" + with("timeEvents", `[{"time":1.5,"description":`+deep+`}]`) + "]",
				"[" + with("stackTrace", deep) + "]",
				"[" + with("status", deep) + "]",
				"[" + baseSpan + "," + `{"unknown":` + deep + `}` + "]",
			} {
				var c spanConverter
				if err := c.convert([]byte(payload), 0); err == nil {
					t.Fatalf("depth %d %s: accepted %.80q...", depth, kind, payload)
				}
				if len(c.spans) != 0 {
					t.Fatalf("depth %d %s: spans kept from a rejected export", depth, kind)
				}
			}
		}
	}
	// Within the limit, a nested attribute value is kept as its JSON text.
	inner := nested(maxJSONDepth-2, "mixed", "1")
	sp := convertOne(t, with("attributes", `{"a":`+inner+`}`))
	if got := attrs(sp.Attributes); got != fmt.Sprintf("a=%q", inner) {
		t.Fatalf("attributes %.100s", got)
	}
}

// TestDeepNestingOverTheSocket: a TRACE_EXPORT nested 10,000 levels deep is discarded as
// undecodable and the connection carries on with the next message.
func TestDeepNestingOverTheSocket(t *testing.T) {
	undecodable := counter(discarded[ocdaemon.ReasonUndecodable])
	h := start(t, nil)
	s := newStream(21).init().spans("before").
		add(ocdaemon.TraceExport, []byte("["+nested(10_000, "mixed", "1")+"]")).
		spans("after")
	h.replay(s.buf, 4096)
	h.shutdown()
	if got := spanNames(t, h.rec.Received())[21]; !slices.Equal(got, []string{"before", "after"}) {
		t.Fatalf("spans %v", got)
	}
	if d := counter(discarded[ocdaemon.ReasonUndecodable]) - undecodable; d != 1 {
		t.Fatalf("undecodable %v, want 1", d)
	}
}

// TestHugeDeclaredLength: headers declaring 2^62 and 2^64-1 payload bytes, with nothing after
// them, are refused at the header: nothing is awaited or reserved, and the next message on the
// connection is served.
func TestHugeDeclaredLength(t *testing.T) {
	tooLarge := counter(discarded[ocdaemon.ReasonTooLarge])
	truncated := counter(discarded[ocdaemon.ReasonTruncated])
	h := start(t, nil)
	s := newStream(22).init()
	for _, n := range []uint64{1 << 62, 1<<64 - 1, uint64(DefaultConfig().MaxMessageBytes) + 1} {
		s.seq++
		s.buf = ocdaemon.AppendHeader(s.buf, &ocdaemon.Header{Type: ocdaemon.TraceExport, Seq: s.seq, PID: 22, Time: s.time, Len: n})
	}
	s.spans("after")
	h.replay(s.buf, 0)
	h.shutdown()
	if got := spanNames(t, h.rec.Received())[22]; !slices.Equal(got, []string{"after"}) {
		t.Fatalf("spans %v", got)
	}
	if d := counter(discarded[ocdaemon.ReasonTooLarge]) - tooLarge; d != 3 {
		t.Fatalf("too large %v, want 3", d)
	}
	if d := counter(discarded[ocdaemon.ReasonTruncated]) - truncated; d != 0 {
		t.Fatalf("truncated %v, want 0", d)
	}
}
