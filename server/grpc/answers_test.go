package grpcserver

import (
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// A client that grants its stream no window takes no answer. The stream answers
// StreamMaxUnsent requests, reads one more and stops reading there, waiting to answer it; when
// no answer is taken within StreamAnswerTimeout grpc-go's transport closes the connection (it
// frees a stream's queued answers no other way), the own transport ends the stream alone,
// RESOURCE_EXHAUSTED, and the connection serves on. Both read the same requests, and count
// the stall.
func TestUnsentAnswersStopReading(t *testing.T) { onTransports(t, testUnsentAnswersStopReading) }

func testUnsentAnswersStopReading(t *testing.T, tr string) {
	for _, ack := range []pipeline.AckMode{pipeline.AckAccept, pipeline.AckUpstream} {
		pc := testPipelineConfig()
		pc.Ack = ack
		sc := configFor(tr)
		sc.StreamMaxUnsent = 4
		sc.StreamWindow = 3 // -ack=upstream: the loop also stops once 3 answers are owed
		sc.StreamAnswerTimeout = 300 * time.Millisecond
		e := start(t, pc, sc, nil)
		read := func() float64 { return testutil.ToFloat64(ctr.bytes[kindOTEPStream][fastpath.Traces]) }
		before, stalls, closes := read(), testutil.ToFloat64(streamStalls), testutil.ToFloat64(closedConns[closeAnswers])
		timeouts := testutil.ToFloat64(streamAnswerTimeouts)
		c := dialH2(t, e.srv.Addr().String(), "", nil, 0)
		id := c.open(t, "/otlpgate.otep.v1.StreamExporter/ExportTraces")
		for n := range 20 {
			c.data(t, id, grpcMsg(2, protowire.AppendVarint([]byte{0x08}, uint64(n+1))))
		}
		wantCloses, wantTimeouts := 1.0, 0.0
		if tr == TransportOwn {
			wantCloses, wantTimeouts = 0, 1
			end := c.waitEnd(t)
			if end.id != id || end.status != strconv.Itoa(int(codes.ResourceExhausted)) {
				t.Fatalf("ack=%v: stream end %+v, want trailers with RESOURCE_EXHAUSTED", ack, end)
			}
			if end = c.waitEnd(t); !end.reset || end.code != http2.ErrCodeNo {
				t.Fatalf("ack=%v: after the trailers %+v, want RST_STREAM NO_ERROR", ack, end)
			}
			// The connection serves on: a call on it is answered (trailers-only: the client
			// grants no window for a message).
			u := c.open(t, "/no.such.Service/Export")
			c.dataEnd(t, u, grpcMsg(2, []byte{0x08, 0x63}))
			if end = c.waitEnd(t); end.id != u || end.status != strconv.Itoa(int(codes.Unimplemented)) {
				t.Fatalf("ack=%v: call after the stream ended: %+v", ack, end)
			}
			if c.isClosed() {
				t.Fatalf("ack=%v: the connection was closed", ack)
			}
		} else {
			c.waitClosed(t, 30*time.Second)
		}
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
		if got := testutil.ToFloat64(closedConns[closeAnswers]) - closes; got != wantCloses {
			t.Errorf("ack=%v: %v connections closed for answers not taken, want %v", ack, got, wantCloses)
		}
		if got := testutil.ToFloat64(streamAnswerTimeouts) - timeouts; got != wantTimeouts {
			t.Errorf("ack=%v: %v streams ended for answers not taken, want %v", ack, got, wantTimeouts)
		}
	}
}
