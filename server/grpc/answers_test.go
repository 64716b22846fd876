package grpcserver

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
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

// A stream that stopped reading because its client took no answer reads on, from where it
// stopped, once the client grants window: every request is answered, in order, by its id,
// and the stream ends cleanly. On both transports.
func TestStalledStreamReadsOnWhenAnswersTaken(t *testing.T) {
	onTransports(t, testStalledStreamReadsOnWhenAnswersTaken)
}

func testStalledStreamReadsOnWhenAnswersTaken(t *testing.T, tr string) {
	const n = 40
	sc := configFor(tr)
	sc.StreamMaxUnsent = 4
	e := start(t, testPipelineConfig(), sc, nil)
	read := func() float64 { return testutil.ToFloat64(ctr.reqs[kindOTEPStream][fastpath.Traces]) }
	before := read()
	c := dialH2(t, e.srv.Addr().String(), "", nil, 0)
	id := c.open(t, "/otlpgate.otep.v1.StreamExporter/ExportTraces")
	body := traceBody(t, 3, 2)
	for i := range n {
		req := otepReq(t, uint64(i+1), body)
		c.data(t, id, grpcMsg(len(req), req))
	}
	testkit.WaitFor(t, "the stream to stop reading", func() bool { return read()-before >= 5 })
	time.Sleep(50 * time.Millisecond) // it stays stopped
	if got := read() - before; got != 5 {
		t.Fatalf("the stream read %v requests with no answer taken, want 5", got)
	}
	c.grant(t, id, 1<<20)
	var answers []byte
	testkit.WaitFor(t, "every answer", func() bool {
		answers = c.received(id)
		return countMessages(answers) == n
	})
	for want := uint64(1); len(answers) > 0; want++ {
		m := answers[5 : 5+binary.BigEndian.Uint32(answers[1:5])]
		answers = answers[5+len(m):]
		var resp otepv1.ExportResponse
		if err := resp.UnmarshalVT(m); err != nil || resp.Id != want || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("answer %d: %v, %v", want, &resp, err)
		}
	}
	c.dataEnd(t, id, nil)
	if end := c.waitEnd(t); end.id != id || end.status != "0" {
		t.Fatalf("stream end %+v, want grpc-status 0", end)
	}
	e.p.Flush()
	if _, items := totals(e.rec); items != 2*n {
		t.Fatalf("destination got %d spans, want %d", items, 2*n)
	}
}

// countMessages counts the whole gRPC messages in b.
func countMessages(b []byte) int {
	n := 0
	for len(b) >= 5 {
		l := 5 + int(binary.BigEndian.Uint32(b[1:5]))
		if len(b) < l {
			break
		}
		b = b[l:]
		n++
	}
	return n
}
