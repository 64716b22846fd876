package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/pool"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// owner records how each batch built by newBatch was finished.
type owner struct {
	mu   sync.Mutex
	done []bool
}

func (o *owner) BatchDone(delivered bool) {
	o.mu.Lock()
	o.done = append(o.done, delivered)
	o.mu.Unlock()
}

func (o *owner) results() []bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]bool(nil), o.done...)
}

func newBatch(o *owner, sig fastpath.Signal, items int, body string) *pipeline.Batch {
	p := pool.NewPayload(len(body))
	*p.Buf() = append(*p.Buf(), body...)
	return pipeline.NewBatch(sig, items, p, o)
}

// The recorder keeps the exact bytes of every batch, finishes them as told (at once, failed,
// held until released, one held batch at a time), and refuses with the error it is given.
func TestRecorderKeepsAndFinishes(t *testing.T) {
	o := &owner{}
	r := NewRecorder("r")
	if r.Name() != "r" || (&Recorder{}).Name() != "recorder" {
		t.Fatalf("names %q, %q", r.Name(), (&Recorder{}).Name())
	}
	r.Enqueue(newBatch(o, fastpath.Traces, 1, "a"))
	r.SetFail(true)
	r.Enqueue(newBatch(o, fastpath.Logs, 2, "bb"))
	r.SetFail(false)
	r.SetHold(true)
	r.Enqueue(newBatch(o, fastpath.Traces, 3, "ccc"))
	r.Enqueue(newBatch(o, fastpath.Metrics, 4, "dddd"))
	r.Enqueue(newBatch(o, fastpath.Traces, 5, "eeeee"))
	if got := o.results(); len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("finished %v, want [true false] and three held", got)
	}
	r.ReleaseAt(1, false)
	if h := r.Held(); h != 2 {
		t.Fatalf("%d held after ReleaseAt, want 2", h)
	}
	if n := r.Release(true); n != 2 {
		t.Fatalf("Release finished %d, want 2", n)
	}
	if got := o.results(); fmt.Sprint(got) != "[true false false true true]" {
		t.Fatalf("finished %v", got)
	}
	r.Enqueue(newBatch(o, fastpath.Traces, 6, "f")) // no longer held
	if got := o.results(); len(got) != 6 || !got[5] {
		t.Fatalf("finished %v after Release: want the next batch finished at once", got)
	}
	refused := errors.New("full")
	r.SetErr(refused)
	b := newBatch(o, fastpath.Traces, 7, "g")
	if err := r.Enqueue(b); err != refused {
		t.Fatalf("Enqueue: %v, want the error set", err)
	}
	b.Done(false)
	if err := r.Consume(pipeline.Request{Signal: fastpath.Logs, Body: []byte("h"), Items: 1}); err != refused {
		t.Fatalf("Consume: %v, want the error set", err)
	}
	r.SetErr(nil)
	body := []byte("iii")
	r.Consume(pipeline.Request{Signal: fastpath.Logs, Body: body, Items: 8})
	body[0] = 'x' // the caller may reuse its buffer at once

	if body, items := r.Payload(); string(body) != "abbcccddddeeeeefiii" || items != 1+2+3+4+5+6+8 {
		t.Fatalf("payload %q, %d items", body, items)
	}
	if got := r.Bodies(fastpath.Logs); len(got) != 2 || string(got[0]) != "bb" || string(got[1]) != "iii" {
		t.Fatalf("logs bodies %q", got)
	}
	got := r.Received()
	if r.Count() != 7 || len(got) != 7 || got[3].Signal != fastpath.Metrics || got[3].Items != 4 || got[3].At.IsZero() {
		t.Fatalf("received %+v", got)
	}
}

// SpanIDs reads the ids of a trace body, and the recorder counts them over every trace batch.
func TestRecorderSpanIDs(t *testing.T) {
	g := otlpgen.New(1)
	req := g.Spans(otlpgen.Shape{Spans: 3, Attrs: 1})
	body, err := req.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	want := ResourceSpanIDs(req.ResourceSpans)
	if len(want) != 3 {
		t.Fatalf("%d ids", len(want))
	}
	r := &Recorder{}
	r.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 3})
	r.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 3})
	r.Consume(pipeline.Request{Signal: fastpath.Traces, Body: []byte{0xff}, Items: 1})
	r.Consume(pipeline.Request{Signal: fastpath.Logs, Body: []byte{0xff}, Items: 1}) // not a trace body: not read
	ids, bad := r.SpanIDs()
	if bad != 1 || len(ids) != 3 {
		t.Fatalf("%v, %d bad", ids, bad)
	}
	for _, id := range want {
		if ids[id] != 2 {
			t.Fatalf("span %x counted %d times, want 2", id, ids[id])
		}
	}
	if len(Traces(t, body).ResourceSpans) != len(req.ResourceSpans) {
		t.Fatal("Traces decoded something else")
	}
}

// The sink keeps the exact bytes of v1 and OTEP requests, answers OTEP requests by id,
// counts the span ids of both, holds its answers until released and, silent, answers none.
func TestGRPCSink(t *testing.T) {
	s := StartGRPCSink(t, "")
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := otlpgen.New(2)
	v1 := g.Spans(otlpgen.Shape{Spans: 2, Attrs: 1})
	if _, err := coltracev1.NewTraceServiceClient(conn).Export(ctx, v1); err != nil {
		t.Fatal(err)
	}
	st, err := otepv1.NewStreamExporterClient(conn).ExportTraces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	otep := &otepv1.TraceExportRequest{Id: 42, ResourceSpans: v1.ResourceSpans}
	if err := st.Send(otep); err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Recv(); err != nil || resp.Id != 42 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("answer %v, %v", resp, err)
	}

	s.HoldAnswers()
	otep.Id = 43
	st.Send(otep)
	WaitFor(t, "the held request to arrive", func() bool { return len(s.Requests()) == 3 })
	s.ReleaseAnswers()
	if resp, err := st.Recv(); err != nil || resp.Id != 43 {
		t.Fatalf("answer after release %v, %v", resp, err)
	}

	reqs := s.Requests()
	v1b, _ := v1.MarshalVT()
	otepb, _ := otep.MarshalVT()
	if reqs[0].OTEP || reqs[0].Stream != 0 || !bytes.Equal(reqs[0].Body, v1b) || reqs[0].Signal != fastpath.Traces {
		t.Fatalf("v1 request recorded as %+v", reqs[0])
	}
	if !reqs[2].OTEP || reqs[2].ID != 43 || reqs[2].Stream != 1 || !bytes.Equal(reqs[2].Body, otepb) {
		t.Fatalf("OTEP request recorded as %+v", reqs[2])
	}
	ids := ResourceSpanIDs(v1.ResourceSpans)
	if total, dups := s.SpanCount(); total != 6 || dups != 4 || s.Fewer(ids, 3) != 0 || s.Fewer(ids, 4) != 2 {
		t.Fatalf("%d spans, %d duplicates; %v", total, dups, s.Spans())
	}
	if got := s.FirstArrivals(); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("first arrivals %v, want %v", got, ids)
	}

	s.SetSilent(true)
	otep.Id = 44
	st.Send(otep)
	WaitFor(t, "the unanswered request to arrive", func() bool { return len(s.Requests()) == 4 })
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if _, err := coltracev1.NewTraceServiceClient(conn).Export(short, v1); err == nil {
		t.Fatal("a silent sink answered a v1 call")
	}
	if s.Streams() != 1 {
		t.Fatalf("%d streams", s.Streams())
	}
	if !strings.Contains(s.String(), "5 requests") {
		t.Fatalf("String() = %q", s.String())
	}
	s.Stop()
	if _, err := st.Recv(); err == nil {
		t.Fatal("stream still open after Stop")
	}
}

// The clock moves only when advanced and fires the timers it passes; a cancelled timer never
// fires.
func TestClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewClock(start)
	a, _ := c.At(start.Add(time.Second))
	b, cancel := c.At(start.Add(2 * time.Second))
	past, _ := c.At(start)
	if got := <-past; !got.Equal(start) {
		t.Fatalf("a timer in the past fired at %v", got)
	}
	if !c.WaitingAt(start.Add(time.Second)) || c.WaitingAt(start.Add(3*time.Second)) {
		t.Fatal("WaitingAt does not match the timers")
	}
	c.Advance(1500 * time.Millisecond)
	select {
	case got := <-a:
		if !got.Equal(start.Add(1500 * time.Millisecond)) {
			t.Fatalf("fired at %v", got)
		}
	default:
		t.Fatal("the passed timer did not fire")
	}
	cancel()
	c.Advance(time.Hour)
	select {
	case <-b:
		t.Fatal("a cancelled timer fired")
	default:
	}
	if !c.Now().Equal(start.Add(time.Hour + 1500*time.Millisecond)) {
		t.Fatalf("Now() = %v", c.Now())
	}
}

// fatalTB records a Fatalf and ends its goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// WaitFor returns once the condition holds and, when it never does, fails after WaitTimeout
// naming what it waited for. In a synctest bubble the minute passes at once.
func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n := 0
		WaitFor(t, "three polls", func() bool { n++; return n == 3 })
		f := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			WaitFor(f, "a condition that never holds", func() bool { return false })
		}()
		<-done
		if want := "timed out after 1m0s waiting for a condition that never holds"; f.msg != want {
			t.Fatalf("failure %q, want %q", f.msg, want)
		}
		if waited := time.Since(start); waited < WaitTimeout || waited > WaitTimeout+time.Second {
			t.Fatalf("gave up after %v, want %v", waited, WaitTimeout)
		}
	})
}

// OpenFDs counts a file opened and closed.
func TestOpenFDs(t *testing.T) {
	before := OpenFDs(t)
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := OpenFDs(t); got != before+1 {
		t.Errorf("%d descriptors with one more file open, want %d", got, before+1)
	}
	f.Close()
	if got := OpenFDs(t); got != before {
		t.Errorf("%d descriptors after closing it, want %d", got, before)
	}
}

func TestCounter(t *testing.T) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "testkit_counter_test_total", Help: "test"}, []string{"a", "b"})
	prometheus.MustRegister(c)
	defer prometheus.Unregister(c)
	c.WithLabelValues("x", "1").Add(2)
	c.WithLabelValues("x", "2").Add(3)
	c.WithLabelValues("y", "1").Add(5)
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{nil, 10},
		{[]string{"a", "x"}, 5},
		{[]string{"a", "x", "b", "2"}, 3},
		{[]string{"a", "z"}, 0},
	} {
		if got := Counter(t, "testkit_counter_test_total", tc.labels...); got != tc.want {
			t.Errorf("Counter(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
	if got := Counter(t, "testkit_no_such_total"); got != 0 {
		t.Errorf("missing counter = %v, want 0", got)
	}
}
