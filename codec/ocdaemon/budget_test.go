package ocdaemon

import (
	"bytes"
	"fmt"
	"testing"
)

// testBudget grants up to max bytes at once and records what it holds.
type testBudget struct{ max, held, peak, refused int }

func (b *testBudget) TryReserve(n int) bool {
	if b.held+n > b.max {
		b.refused++
		return false
	}
	b.held += n
	b.peak = max(b.peak, b.held)
	return true
}

func (b *testBudget) Unreserve(n int) { b.held -= n }

// A message that does not arrive in one read is carried only with the Budget's consent: when
// refused, it is discarded as ReasonNoMemory, its remaining bytes are skipped as they arrive,
// and the next message is cut as usual.
func TestSplitterBudget(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 20000) // needs a carry of 32KiB once split
	json := []byte(`[{"traceId":"0af7651916cd43dd8448eb211c80319c"}]`)
	stream := concat(
		AppendFrame(nil, hdr(TraceExport, 1), big),
		AppendFrame(nil, hdr(TraceExport, 2), json),
		AppendFrame(nil, hdr(ReqShutdown, 3), nil),
	)
	run := func(budget *testBudget, chunk int) (frames []string, discards [NumReasons]int) {
		s := NewSplitter(1 << 20)
		s.Discard = func(r Reason) { discards[r]++ }
		s.Budget = budget
		var f Frame
		for off := 0; off < len(stream); off += chunk {
			s.Feed(stream[off:min(off+chunk, len(stream))])
			for s.Next(&f) {
				frames = append(frames, fmt.Sprintf("%s %d %d", f.Type, f.Seq, len(f.Payload)))
			}
			if budget.held > budget.max {
				t.Fatalf("carry holds %d bytes, budget %d", budget.held, budget.max)
			}
		}
		s.Close()
		if budget.held != 0 {
			t.Fatalf("%d bytes still reserved after Close", budget.held)
		}
		return frames, discards
	}
	both := fmt.Sprintf("trace_export 2 %d", len(json))
	// Enough room: every message arrives.
	b := &testBudget{max: 64 << 10}
	frames, discards := run(b, 4096)
	want := []string{fmt.Sprintf("trace_export 1 %d", len(big)), both, "req_shutdown 3 0"}
	if fmt.Sprint(frames) != fmt.Sprint(want) || discards != [NumReasons]int{} {
		t.Fatalf("with room: frames %v discards %v, want %v and none", frames, discards, want)
	}
	if b.peak == 0 || b.refused != 0 {
		t.Fatalf("with room: peak %d refused %d, want a reservation and no refusal", b.peak, b.refused)
	}
	// 8KiB of room: the large message is dropped, the others survive.
	for _, chunk := range []int{4096, 1000, 7} {
		b := &testBudget{max: 8 << 10}
		frames, discards := run(b, chunk)
		want := []string{both, "req_shutdown 3 0"}
		if fmt.Sprint(frames) != fmt.Sprint(want) || discards != [NumReasons]int{ReasonNoMemory: 1} {
			t.Fatalf("chunk %d, 8KiB budget: frames %v discards %v, want %v and one no-memory discard", chunk, frames, discards, want)
		}
		if b.peak > 8<<10 || b.refused == 0 {
			t.Fatalf("chunk %d: peak %d refused %d", chunk, b.peak, b.refused)
		}
	}
}
