package grpcserver

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// A client that grants its stream no window takes no answer. The stream answers
// StreamMaxUnsent requests, reads one more and stops reading there, waiting to answer it; when
// no answer is taken within StreamAnswerTimeout the connection is closed. Both are counted.
func TestUnsentAnswersStopReading(t *testing.T) {
	for _, ack := range []pipeline.AckMode{pipeline.AckAccept, pipeline.AckUpstream} {
		pc := testPipelineConfig()
		pc.Ack = ack
		sc := DefaultConfig()
		sc.StreamMaxUnsent = 4
		sc.StreamWindow = 3 // -ack=upstream: the loop also stops once 3 answers are owed
		sc.StreamAnswerTimeout = 300 * time.Millisecond
		e := start(t, pc, sc, nil)
		read := func() float64 { return testutil.ToFloat64(ctr.bytes[kindOTEPStream][fastpath.Traces]) }
		before, stalls, closes := read(), testutil.ToFloat64(streamStalls), testutil.ToFloat64(closedConns[closeAnswers])
		c := dialH2(t, e.srv.Addr().String(), "", nil, 0)
		id := c.open(t, "/otlpgate.otep.v1.StreamExporter/ExportTraces")
		for n := range 20 {
			c.data(t, id, grpcMsg(2, protowire.AppendVarint([]byte{0x08}, uint64(n+1))))
		}
		c.waitClosed(t, 30*time.Second)
		// -ack=accept: 4 answers wait in their slots and the loop waits to send the 5th.
		// -ack=upstream: the sender holds 4 in slots and waits with the 5th; the window of 3
		// is the 5th and 2 queued behind it, and the loop waits for room with the 8th.
		want := 5
		if ack == pipeline.AckUpstream {
			want = 8
		}
		if got := (read() - before) / 2; got != float64(want) {
			t.Errorf("ack=%v: the stream read %v requests, want %d", ack, got, want)
		}
		if got := testutil.ToFloat64(streamStalls) - stalls; got != 1 {
			t.Errorf("ack=%v: %v stalls, want 1", ack, got)
		}
		if got := testutil.ToFloat64(closedConns[closeAnswers]) - closes; got != 1 {
			t.Errorf("ack=%v: %v connections closed for answers not taken, want 1", ack, got)
		}
	}
}
