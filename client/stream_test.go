package client

import (
	"bytes"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

func streamConfig(t testing.TB, addr string, streams, window int) Config {
	c := testConfig(t, addr)
	c.Protocol, c.Mode, c.Streams, c.Window = ProtocolOTEP, ModeStream, streams, window
	return c
}

// streamConfigOn is streamConfig on the gRPC transport tr.
func streamConfigOn(t testing.TB, tr, addr string, streams, window int) Config {
	c := streamConfig(t, addr, streams, window)
	c.Transport = tr
	return c
}

// checkIDs verifies that id k carried batch b<k-1> (ids follow Enqueue order), with the bytes
// the batch was made of.
func checkIDs(t *testing.T, f *feeder, got []received) {
	t.Helper()
	for _, g := range got {
		if want := "b" + strconv.Itoa(int(g.id)-1); g.tag != want {
			t.Errorf("stream %d: id %d carried %q, want %q", g.stream, g.id, g.tag, want)
			continue
		}
		if !bytes.Equal(g.body, f.body(g.tag)) {
			t.Errorf("id %d: body differs from the batch's payload", g.id)
		}
	}
}

func ids(got []received) []uint64 {
	var out []uint64
	for _, g := range got {
		out = append(out, g.id)
	}
	slices.Sort(out)
	return out
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// Two streams with a window of four: the upstream answers only when a stream's window is full
// (and at the end), newest first. Every batch is delivered once, ids are 1..n in Enqueue order,
// no stream ever has more than four requests unanswered, and both streams carry requests.
func TestStreamWindowOutOfOrder(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		for _, shape := range []struct {
			name         string
			entries, pad int
		}{{"views", 3, 1200}, {"copied", 1, 10}} {
			t.Run(shape.name, func(t *testing.T) {
				const n, window = 40, 4
				u := newUpstream(t)
				u.window = window
				total := 0
				u.onStream = func(s *srvStream, g received) error {
					u.mu.Lock()
					total++
					last := total == n
					streams := slices.Clone(u.streams)
					u.mu.Unlock()
					flush := func(s *srvStream) {
						s.mu.Lock()
						var pend []uint64
						for id := range s.unacked {
							pend = append(pend, id)
						}
						s.mu.Unlock()
						slices.Sort(pend)
						slices.Reverse(pend)
						for _, id := range pend {
							s.ack(id, otepv1.ResultCode_Success)
						}
					}
					if last {
						for _, s := range streams {
							flush(s)
						}
					} else if s.pending() >= window {
						flush(s)
					}
					return nil
				}
				d := startDest(t, streamConfigOn(t, tr, u.addr, 2, window))
				f := newFeeder(t, d)
				f.send(0, n, shape.entries, shape.pad)
				if ok := f.waitAll(); !allTrue(ok) {
					t.Fatalf("delivered: %v", ok)
				}
				got := u.received()
				if !slices.Equal(ids(got), seq(1, n)) {
					t.Fatalf("ids received %v, want 1..%d once each", ids(got), n)
				}
				checkIDs(t, f, got)
				u.checkViolations()
				per := map[int]int{}
				for _, g := range got {
					per[g.stream]++
				}
				if len(per) != 2 {
					t.Errorf("requests per stream %v, want two streams", per)
				}
				if err := shutdown(t, d, waitFor); err != nil {
					t.Fatal(err)
				}
				if a, s := value(d.m.ackedRequests), value(d.m.sentRequests); a != n || s != n {
					t.Errorf("acknowledged %d, sent %d, want %d", a, s, n)
				}
				if v := value(d.m.inFlight); v != 0 {
					t.Errorf("in flight %d after shutdown", v)
				}
				if v := value(d.m.queueBytes); v != 0 {
					t.Errorf("queue bytes %d after shutdown", v)
				}
			})
		}
	})
}

// Result codes on a stream: Success delivers, FailedNoneRetryable drops without re-sending,
// FailedRetryable sends the same id again after a backoff.
func TestStreamResultCodes(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		seen := map[string]int{}
		u.onStream = func(s *srvStream, g received) error {
			u.mu.Lock()
			seen[g.tag]++
			k := seen[g.tag]
			u.mu.Unlock()
			code := otepv1.ResultCode_Success
			switch {
			case g.tag == "b1":
				code = otepv1.ResultCode_FailedNoneRetryable
			case g.tag == "b2" && k <= 2:
				code = otepv1.ResultCode_FailedRetryable
			}
			s.ack(g.id, code)
			return nil
		}
		d := startDest(t, streamConfigOn(t, tr, u.addr, 1, 8))
		f := newFeeder(t, d)
		f.send(0, 4, 2, 300)
		if got, want := f.waitAll(), []bool{true, false, true, true}; !slices.Equal(got, want) {
			t.Fatalf("delivered %v, want %v", got, want)
		}
		got := u.received()
		checkIDs(t, f, got)
		if c := count(u.tags()); c["b0"] != 1 || c["b1"] != 1 || c["b2"] != 3 || c["b3"] != 1 {
			t.Errorf("requests per batch %v, want b2 three times, the others once", c)
		}
		if a, r, x := value(d.m.ackedRequests), value(d.m.retried[RetryFailed]), value(d.m.dropped[DropRejected]); a != 3 || r != 2 || x != 1 {
			t.Errorf("acknowledged %d, retried %d, rejected %d; want 3, 2, 1", a, r, x)
		}
		if v := value(d.m.droppedItems[DropRejected]); v != 2 {
			t.Errorf("rejected items %d, want 2", v)
		}
	})
}

// A request that keeps failing is given up once its next retry would land past
// RetryMaxElapsed.
func TestStreamRetryExhausted(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		u.onStream = func(s *srvStream, g received) error {
			s.ack(g.id, otepv1.ResultCode_FailedRetryable)
			return nil
		}
		cfg := streamConfigOn(t, tr, u.addr, 1, 4)
		cfg.RetryMaxElapsed = 100 * time.Millisecond
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 1, 1, 10)
		if f.wait(0) {
			t.Fatal("delivered")
		}
		sends := len(u.received())
		if v := value(d.m.dropped[DropRetryExhausted]); v != 1 {
			t.Errorf("retry_exhausted %d, want 1", v)
		}
		// Every send but the first is a retry; the last retry scheduled may also run out of budget
		// while it waits in the queue (a slow machine), and is then dropped unsent.
		if r := value(d.m.retried[RetryFailed]); r != sends-1 && r != sends {
			t.Errorf("retried %d times, upstream saw %d sends", r, sends)
		}
		for _, g := range u.received() {
			if g.id != 1 {
				t.Errorf("re-send with id %d, want the same id 1", g.id)
			}
		}
	})
}

// No answer within AckTimeout: the request is sent again with its id, nothing is dropped.
// "silent": the stream answered nothing since the request went out, so the stream is given up
// and everything pending on it goes again on a new one. "answering": the stream answers the
// other requests, so it stays, and only the late one is sent again on it; the late answer to
// the first copy, when it comes, is counted as unknown.
func TestStreamAckTimeout(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		t.Run("silent", func(t *testing.T) {
			u := newUpstream(t)
			u.onStream = func(s *srvStream, g received) error {
				if s.n == 1 {
					return nil // the first stream reads and never answers
				}
				s.ack(g.id, otepv1.ResultCode_Success)
				return nil
			}
			cfg := streamConfigOn(t, tr, u.addr, 1, 4)
			cfg.AckTimeout = time.Second
			d := startDest(t, cfg)
			f := newFeeder(t, d)
			f.send(0, 4, 1, 10)
			if got := f.waitAll(); !allTrue(got) {
				t.Fatalf("delivered %v, want all", got)
			}
			got := u.received()
			checkIDs(t, f, got)
			groups := byStream(got)
			if len(groups) != 2 || !slices.Equal(groups[0].ids, seq(1, 4)) || !slices.Equal(groups[1].ids, seq(1, 4)) {
				t.Fatalf("streams %v, want ids 1..4 on the silent stream, then 1..4 again on a new one", groups)
			}
			// Every request went again: the sweeper's overdue ones and, once it ended the stream,
			// the rest.
			if r, a, e := value(d.m.resent), value(d.m.ackTimeouts), value(d.m.streamsEnded[endAckTimeout]); r != 4 || a < 1 || e != 1 {
				t.Errorf("resent %d, ack timeouts %d, streams ended for silence %d; want 4, at least 1, 1", r, a, e)
			}
			for reason, c := range d.m.dropped {
				if v := value(c); v != 0 {
					t.Errorf("dropped %d with reason %s", v, DropReason(reason))
				}
			}
			if v := value(d.m.inFlight); v != 0 {
				t.Errorf("in flight %d", v)
			}
		})
		t.Run("retry-on-reconnect=false", func(t *testing.T) {
			// The documented way to give unanswered requests up: each is dropped and counted,
			// ack_timeout for the overdue ones, stream_broken for the rest of the stream given up.
			u := newUpstream(t)
			u.onStream = func(s *srvStream, g received) error { return nil }
			cfg := streamConfigOn(t, tr, u.addr, 1, 4)
			cfg.AckTimeout = time.Second
			cfg.RetryOnReconnect = false
			d := startDest(t, cfg)
			f := newFeeder(t, d)
			f.send(0, 4, 1, 10)
			if got := f.waitAll(); !slices.Equal(got, []bool{false, false, false, false}) {
				t.Fatalf("delivered %v, want none", got)
			}
			if c := count(u.tags()); len(c) != 4 || len(u.tags()) != 4 {
				t.Errorf("sends per batch %v, want each once", c)
			}
			a, b := value(d.m.dropped[DropAckTimeout]), value(d.m.dropped[DropStreamBroken])
			if a < 1 || a+b != 4 || value(d.m.ackTimeouts) != a || value(d.m.resent) != 0 {
				t.Errorf("dropped ack_timeout %d, stream_broken %d, ack timeouts %d, resent %d; want 4 dropped, the timed out as ack_timeout, none resent",
					a, b, value(d.m.ackTimeouts), value(d.m.resent))
			}
		})
		t.Run("answering", func(t *testing.T) {
			u := newUpstream(t)
			var late *srvStream
			u.onStream = func(s *srvStream, g received) error {
				u.mu.Lock()
				first := g.tag == "b1" && late == nil
				if first {
					late = s
				}
				u.mu.Unlock()
				if first {
					return nil // the first copy is never answered in time
				}
				s.ack(g.id, otepv1.ResultCode_Success)
				return nil
			}
			cfg := streamConfigOn(t, tr, u.addr, 1, 4)
			cfg.AckTimeout = time.Second
			d := startDest(t, cfg)
			f := newFeeder(t, d)
			f.send(0, 4, 1, 10)
			if got := f.waitAll(); !allTrue(got) {
				t.Fatalf("delivered %v, want all", got)
			}
			got := u.received()
			checkIDs(t, f, got)
			if c := count(u.tags()); c["b0"] != 1 || c["b1"] != 2 || c["b2"] != 1 || c["b3"] != 1 {
				t.Errorf("sends per batch %v, want b1 twice, the others once", c)
			}
			if groups := byStream(got); len(groups) != 1 {
				t.Errorf("streams %v, want the answering one only", groups)
			}
			if r, a, e := value(d.m.resent), value(d.m.ackTimeouts), value(d.m.streamsEnded[endAckTimeout]); r != 1 || a != 1 || e != 0 {
				t.Errorf("resent %d, ack timeouts %d, streams ended for silence %d; want 1, 1, 0", r, a, e)
			}
			u.mu.Lock()
			late.ack(2, otepv1.ResultCode_Success)
			u.mu.Unlock()
			for i := 0; value(d.m.unknownAcks) == 0; i++ {
				if i == 3000 {
					t.Fatal("late answer never counted")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := shutdown(t, d, waitFor); err != nil {
				t.Fatal(err)
			}
			for reason, c := range d.m.dropped {
				if v := value(c); v != 0 {
					t.Errorf("dropped %d with reason %s", v, DropReason(reason))
				}
			}
		})
	})
}

// An upstream that withholds its flow-control window for twice the ack timeout and then reads
// and answers at once: the requests blocked behind the closed window, in SendMsg or in the
// transport, are not timed out meanwhile, because the time the stream is stalled on flow
// control is not the upstream's answer time. Then every batch is delivered, once unless a
// timeout after the window opened (a machine too busy to read an answer within the ack
// timeout) sent it again, and all on one stream but for such re-sends.
func TestStreamFlowControlStallNotTimedOut(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n = 8
		// The smallest windows the server may set (which also turns off its window growth): a
		// 48 KiB request fills most of one.
		u := newUpstream(t, grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10))
		release := make(chan struct{})
		u.onStream = func(s *srvStream, g received) error {
			s.ack(g.id, otepv1.ResultCode_Success)
			if g.tag == "b0" {
				<-release // read nothing more: the window stays closed
			}
			return nil
		}
		cfg := streamConfigOn(t, tr, u.addr, 1, n)
		cfg.AckTimeout = 1500 * time.Millisecond
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, n, 1, 48<<10)
		if !f.wait(0) {
			t.Fatal("b0 not delivered")
		}
		for deadline := time.Now().Add(waitFor); d.sending.Load() < 2; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the requests after b0 were never sent")
			}
		}
		time.Sleep(2 * cfg.AckTimeout)
		// The window held: the upstream read b0 alone and the lane could not hand all the rest
		// over. Nothing was timed out meanwhile.
		timedOut := value(d.m.ackTimeouts) + value(d.m.dropped[DropAckTimeout])
		if got, sending := len(u.received()), d.sending.Load(); got != 1 || sending >= n-1 {
			t.Fatalf("upstream read %d requests, %d handed over or being sent: the window did not hold", got, sending)
		}
		close(release)
		if timedOut != 0 {
			t.Errorf("%d requests timed out while the stream was stalled on flow control", timedOut)
		}
		if got := f.waitAll(); !allTrue(got) {
			t.Fatalf("delivered %v, want all", got)
		}
		got := u.received()
		checkIDs(t, f, got)
		later, resent := value(d.m.ackTimeouts), value(d.m.resent)
		if c := count(u.tags()); len(c) != n || len(got) > n+resent {
			t.Errorf("sends per batch %v, want each once, and no more than %d re-sends", c, resent)
		}
		if groups := byStream(got); resent == 0 && len(groups) != 1 {
			t.Errorf("streams %v, want one", groups)
		}
		if later != 0 {
			t.Logf("%d requests timed out after the window opened (a busy machine), %d re-sent", later, resent)
		}
	})
}

// After RebalanceRequests requests the stream is half-closed and a new one takes the next
// requests; the old stream's answers, sent only once the new stream is in use, are still read.
func TestStreamRebalanceRequests(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n = 10
		u := newUpstream(t)
		total := 0
		u.onStream = func(s *srvStream, g received) error {
			u.mu.Lock()
			total++
			last := total == n
			// The lane sends on its newest stream only: every other stream is an older one,
			// already half-closed.
			var older []*srvStream
			for _, o := range u.streams {
				if o != s || last {
					older = append(older, o)
				}
			}
			u.mu.Unlock()
			for _, o := range older {
				o.mu.Lock()
				pend := make([]uint64, 0, len(o.unacked))
				for id := range o.unacked {
					pend = append(pend, id)
				}
				o.mu.Unlock()
				for _, id := range pend {
					o.ack(id, otepv1.ResultCode_Success)
				}
			}
			return nil
		}
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RebalanceRequests = 3
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, n, 1, 10)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
		got := u.received()
		if !slices.Equal(ids(got), seq(1, n)) {
			t.Fatalf("ids %v, want 1..%d once each", ids(got), n)
		}
		checkIDs(t, f, got)
		// The server numbers streams as their handlers start, which need not be the order the
		// client opened them in: order them by the first id each carried.
		groups := byStream(got)
		if len(groups) != 4 {
			t.Fatalf("streams %v, want 4", groups)
		}
		for i, g := range groups {
			if want := seq(uint64(3*i+1), uint64(min(3*i+3, n))); !slices.Equal(g.ids, want) {
				t.Errorf("stream %d carried %v, want %v", i+1, g.ids, want)
			}
		}
		u.waitUntil("three half-closes", func() bool { return len(u.halfClosed) == 3 })
		u.mu.Lock()
		half := slices.Sorted(slices.Values(u.halfClosed))
		u.mu.Unlock()
		var want []int
		for _, g := range groups[:3] {
			want = append(want, g.stream)
		}
		if slices.Sort(want); !slices.Equal(half, want) {
			t.Errorf("half-closed streams %v, want %v (all but the newest)", half, want)
		}
		if v, r := value(d.m.streamsEnded[endRebalanceRequests]), value(d.m.resent); v != 3 || r != 0 {
			t.Errorf("rebalanced %d, resent %d; want 3, 0", v, r)
		}
	})
}

// A lane that failed to open streams through an outage opens its first stream once the upstream
// is back; when that stream is re-balanced before its first answer (it took RebalanceBytes of a
// backlog at once), the next stream opens at once. The lane used to wait out the outage's
// backoff first (retry-max), the next request in hand, while the other lanes delivered what
// was queued after it: a spool's oldest records arrived after much newer ones. A stream let go
// after an answer resets the backoff. The backoff here is an hour: a lane that waits never
// returns within the test.
func TestStreamRebalanceAfterOutageOpensAtOnce(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RetryInitial, cfg.RetryMax, cfg.RetryMaxElapsed = time.Hour, time.Hour, 0
		cfg.RebalanceRequests = 1
		d := startDest(t, cfg)
		const outage = 20 // failed opens
		l := &lane{d: d, sig: fastpath.Traces, timer: stoppedTimer(), failures: outage}
		first, err := d.openStream(fastpath.Traces, 0)
		if err != nil {
			t.Fatal(err)
		}
		l.cur = first
		first.sent = 1 // due for re-balancing, nothing answered yet
		// Streams are recycled: the one re-opened may be first's struct again, once the
		// upstream let first go; a stream re-opened has a new opening time.
		firstOpened := first.opened
		next := func(what string) *stream {
			t.Helper()
			got := make(chan *stream, 1)
			go func() { got <- l.stream(&request{sig: fastpath.Traces}, 10) }()
			select {
			case s := <-got:
				if s == nil {
					t.Fatalf("%s: no stream", what)
				}
				return s
			case <-time.After(waitFor):
				t.Fatalf("%s: the lane waited for its reconnect backoff", what)
				return nil
			}
		}
		second := next("re-balanced before an answer")
		if second == first && second.opened == firstOpened {
			t.Fatal("the stream due for re-balancing was kept")
		}
		if l.failures != outage {
			t.Errorf("failures %d after a re-balance, want %d kept: an unanswered stream is no sign the upstream answers", l.failures, outage)
		}
		// Let go idle (the lane's rebalance age) after an answer: the backoff is reset.
		second.acked.Store(true)
		second.halfClose(endRebalanceAge)
		l.drop()
		if l.failures != 0 {
			t.Errorf("failures %d after a stream that was answered, want 0", l.failures)
		}
		next("opened after an answered stream")
		l.drop()
		if v := value(d.m.streamsEnded[endRebalanceRequests]); v != 1 {
			t.Errorf("re-balanced by requests %d, want 1", v)
		}
	})
}

// A lane sleeping its reconnect backoff (an outage's, an hour here) is woken by the first
// answer another stream of the destination gets, and sends what it holds at once; woken once,
// it sleeps its next backoff out unless one of its own streams was answered between.
func TestStreamLaneWokenByAnswerAfterOutage(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RetryInitial, cfg.RetryMax, cfg.RetryMaxElapsed = time.Hour, time.Hour, 0
		d := startDest(t, cfg)
		l := &lane{d: d, sig: fastpath.Traces, timer: stoppedTimer(), failures: 20}
		got := make(chan *stream, 1)
		go func() { got <- l.stream(&request{sig: fastpath.Traces}, 10) }()
		// The lane is asleep once it asked for the wake-up channel.
		deadline := time.Now().Add(waitFor)
		for !d.backoffWaiting.Load() {
			if time.Now().After(deadline) {
				t.Fatal("the lane never went to sleep")
			}
			time.Sleep(time.Millisecond)
		}
		// The destination's own lanes send a batch, and the upstream answers it.
		f := newFeeder(t, d)
		f.send(0, 1, 2, 10)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered: %v", ok)
		}
		var s *stream
		select {
		case s = <-got:
			if s == nil {
				t.Fatal("no stream")
			}
		case <-time.After(waitFor):
			t.Fatal("the lane slept its backoff through an answer")
		}
		if !l.wokenEarly || l.failures != 20 {
			t.Errorf("woken early %v, failures %d: want true and 20 (no answer of its own yet)", l.wokenEarly, l.failures)
		}
		// Its stream breaks unanswered: the next sleep is not cut short by others' answers.
		s.cancel()
		go func() { got <- l.stream(&request{sig: fastpath.Traces}, 10) }()
		f.send(1, 1, 2, 10)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered: %v", ok)
		}
		select {
		case s := <-got:
			t.Fatalf("a lane woken once was woken again by another stream's answer (%v)", s != nil)
		case <-time.After(100 * time.Millisecond):
		}
		if !slices.Equal(u.tags(), []string{"b0", "b1"}) {
			t.Errorf("upstream got %v, want b0 and b1", u.tags())
		}
		if err := shutdown(t, d, waitFor); err != nil {
			t.Fatal(err)
		}
		if s := <-got; s != nil {
			t.Error("the lane returned a stream after the destination stopped")
		}
	})
}

// With a rebalance timeout shorter than the time between two sends, every request goes on a
// stream of its own. Each request is sent once the one before was answered: two sends back to
// back can fall within a microsecond of each other on a fast core.
func TestStreamRebalanceTimeout(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n = 5
		u := newUpstream(t)
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RebalanceTimeout = time.Microsecond
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		for i := range n {
			f.send(i, 1, 1, 10)
			if !f.wait(i) {
				t.Fatalf("batch %d not delivered", i)
			}
		}
		got := u.received()
		if !slices.Equal(ids(got), seq(1, n)) {
			t.Fatalf("ids %v", ids(got))
		}
		if groups := byStream(got); len(groups) != n {
			t.Errorf("streams %v, want one per request", groups)
		}
		// Every stream is half-closed, the last one too: past its age with nothing to send, it is
		// closed without waiting for a next request.
		u.waitUntil("five half-closes", func() bool { return len(u.halfClosed) == n })
		if v := value(d.m.streamsEnded[endRebalanceAge]); v != n {
			t.Errorf("rebalanced by age %d, want %d", v, n)
		}
	})
}

// An upstream that keeps a half-closed stream open after answering everything on it: the client
// ends the stream itself once it has been idle for the ack timeout.
func TestStreamRebalanceIdleOldStream(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		u.keepOpen = true
		cfg := streamConfigOn(t, tr, u.addr, 1, 4)
		cfg.RebalanceRequests = 1
		cfg.AckTimeout = 100 * time.Millisecond
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 2, 1, 10)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
		u.waitUntil("the old stream cancelled", func() bool { return len(u.canceled) == 1 })
		if v := value(d.m.streamsEnded[endBroken]); v != 0 {
			t.Errorf("the cancelled old stream counted as broken (%d)", v)
		}
	})
}

// The upstream ends the stream with an error after reading three requests it did not answer:
// they are sent again, with the same ids, on the next stream, and counted as possible
// duplicates. With RetryOnReconnect off they are dropped instead.
func TestStreamBroken(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		for _, resend := range []bool{true, false} {
			t.Run("retry-on-reconnect="+strconv.FormatBool(resend), func(t *testing.T) {
				const n = 6
				u := newUpstream(t)
				u.onStream = func(s *srvStream, g received) error {
					if s.n == 1 {
						if s.pending() == 3 {
							return status.Error(codes.Unavailable, "cut")
						}
						return nil
					}
					s.ack(g.id, otepv1.ResultCode_Success)
					return nil
				}
				cfg := streamConfigOn(t, tr, u.addr, 1, 8)
				cfg.RetryOnReconnect = resend
				d := startDest(t, cfg)
				f := newFeeder(t, d)
				f.send(0, n, 1, 10)
				ok := f.waitAll()
				got := u.received()
				checkIDs(t, f, got)
				first, later := map[uint64]int{}, map[uint64]int{}
				for _, g := range got {
					if g.stream == 1 {
						first[g.id]++
					} else {
						later[g.id]++
					}
				}
				if len(first) != 3 {
					t.Fatalf("first stream read %v, want 3 requests", first)
				}
				for i, delivered := range ok {
					id := uint64(i + 1)
					if later[id] > 1 {
						t.Errorf("id %d sent %d times on later streams", id, later[id])
					}
					if delivered != (later[id] == 1) {
						t.Errorf("id %d: delivered=%v but sent %d times after the break", id, delivered, later[id])
					}
					if resend && !delivered {
						t.Errorf("id %d lost", id)
					}
					if !resend && first[id] == 1 && delivered {
						t.Errorf("id %d re-sent with RetryOnReconnect off", id)
					}
				}
				resent, dropped := value(d.m.resent), value(d.m.dropped[DropStreamBroken])
				if resend && (resent < 3 || resent > n || dropped != 0) {
					t.Errorf("resent %d, dropped %d; want 3..%d and 0", resent, dropped, n)
				}
				if !resend && (dropped < 3 || resent != 0) {
					t.Errorf("resent %d, dropped %d; want 0 and at least 3", resent, dropped)
				}
				// The batches may all be finished (a failed send drops or re-sends at once) before
				// the receiver has read the stream's end and counted it.
				for deadline := time.Now().Add(10 * time.Second); value(d.m.streamsEnded[endBroken]) != 1 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				if v := value(d.m.streamsEnded[endBroken]); v != 1 {
					t.Errorf("broken streams %d, want 1", v)
				}
			})
		}
	})
}

// The upstream process dies with five requests unanswered and comes back on the same port:
// the five are sent again on the new connection and nothing is lost.
func TestStreamUpstreamRestart(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n, window = 10, 5
		u := newUpstream(t)
		hold := true
		u.onStream = func(s *srvStream, g received) error {
			u.mu.Lock()
			h := hold
			u.mu.Unlock()
			if !h {
				s.ack(g.id, otepv1.ResultCode_Success)
			}
			return nil
		}
		d := startDest(t, streamConfigOn(t, tr, u.addr, 1, window))
		f := newFeeder(t, d)
		f.send(0, n, 1, 10)
		u.waitUntil("a full window", func() bool { return len(u.got) == window })
		u.mu.Lock()
		hold = false
		u.mu.Unlock()
		u.restart()
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
		got := u.received()
		checkIDs(t, f, got)
		c := map[uint64]int{}
		for _, g := range got {
			c[g.id]++
		}
		for id := uint64(1); id <= n; id++ {
			want := 1
			if id <= window {
				want = 2
			}
			if c[id] != want {
				t.Errorf("id %d received %d times, want %d", id, c[id], want)
			}
		}
		if v := value(d.m.resent); v != window {
			t.Errorf("resent %d, want %d", v, window)
		}
	})
}

type streamIDs struct {
	stream int
	ids    []uint64
}

// byStream groups the ids received per stream, streams ordered by the first id they carried.
func byStream(got []received) []streamIDs {
	m := map[int][]uint64{}
	for _, g := range got {
		m[g.stream] = append(m[g.stream], g.id)
	}
	var out []streamIDs
	for s, l := range m {
		slices.Sort(l)
		out = append(out, streamIDs{s, l})
	}
	slices.SortFunc(out, func(a, b streamIDs) int { return int(a.ids[0]) - int(b.ids[0]) })
	return out
}

// A stream past its rebalance age with nothing to send is half-closed at once, not at the
// next request: a quiet signal does not pin its balancer backend. The next request opens a new
// stream.
func TestStreamRebalanceIdle(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RebalanceTimeout = 200 * time.Millisecond
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 2, 1, 10)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
		// No request follows: the stream is closed by the age alone.
		u.waitUntil("the idle stream half-closed", func() bool { return len(u.halfClosed) == 1 })
		if v := value(d.m.streamsEnded[endRebalanceAge]); v != 1 {
			t.Errorf("rebalanced by age %d, want 1", v)
		}
		f.send(2, 1, 1, 10)
		if !f.wait(2) {
			t.Fatal("batch 2 not delivered")
		}
		groups := byStream(u.received())
		if len(groups) != 2 || !slices.Equal(groups[0].ids, []uint64{1, 2}) || !slices.Equal(groups[1].ids, []uint64{3}) {
			t.Errorf("streams %v, want [1 2] then [3]", groups)
		}
	})
}

// RebalanceBytes re-opens a stream before a request would take the bytes sent on it past the
// limit: with room for exactly two requests, five go out as two, two and one.
func TestStreamRebalanceBytes(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RebalanceTimeout, cfg.RebalanceRequests = 0, 0
		// On the wire a request is its v1 body, the OTEP id field (two bytes for ids below 128,
		// entries re-tagged in place) and gRPC's five-byte prefix.
		wire := int64(len(traceBody("b0", 1, 10))) + 2 + grpcPrefix
		cfg.RebalanceBytes = 2 * wire
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		for i := range 5 {
			f.send(i, 1, 1, 10)
			if !f.wait(i) {
				t.Fatalf("batch %d not delivered", i)
			}
		}
		groups := byStream(u.received())
		var sizes []int
		for _, g := range groups {
			sizes = append(sizes, len(g.ids))
		}
		if !slices.Equal(sizes, []int{2, 2, 1}) {
			t.Errorf("requests per stream %v, want [2 2 1]", sizes)
		}
		if v := value(d.m.streamsEnded[endRebalanceBytes]); v != 2 {
			t.Errorf("rebalanced by bytes %d, want 2", v)
		}
	})
}

// A batch larger than queue-bytes is taken when the destination holds nothing (refused, it
// could never be sent, and a spool feeder would wait behind it for ever); a second one is
// refused while the first is held.
func TestOversizedBatchTakenWhenEmpty(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		hold := make(chan struct{})
		u.onStream = func(s *srvStream, g received) error {
			<-hold
			s.ack(g.id, otepv1.ResultCode_Success)
			return nil
		}
		cfg := streamConfigOn(t, tr, u.addr, 1, 4)
		cfg.QueueBytes = 1024
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 1, 1, 4096)
		first := d.held.Load()
		if first < 4096 || d.outstanding.Load() != 1 {
			t.Fatalf("held %d bytes in %d requests, want the whole oversized batch", first, d.outstanding.Load())
		}
		// The feeder's pipeline hands the second batch over at once; the destination refuses it.
		f.send(1, 1, 1, 4096)
		if got, n := d.held.Load(), d.outstanding.Load(); got != first || n != 1 {
			t.Errorf("held %d bytes in %d requests after a second oversized batch, want %d in 1", got, n, first)
		}
		close(hold)
		if !f.wait(0) {
			t.Fatal("the oversized batch was not delivered")
		}
		if f.wait(1) {
			t.Error("the refused batch was reported delivered")
		}
	})
}

// Answers larger than the client's stream window (200 KiB through 64 KiB windows): each comes
// in pieces as the client credits what arrived, and every request is acknowledged once.
func TestStreamAnswersLargerThanWindow(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n = 6
		u := newUpstream(t)
		u.answerPad = 200 << 10
		cfg := streamConfigOn(t, tr, u.addr, 1, 4)
		cfg.InitialWindowSize, cfg.InitialConnWindowSize = 64<<10, 64<<10
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, n, 1, 100)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
		got := u.received()
		if !slices.Equal(ids(got), seq(1, n)) {
			t.Fatalf("ids %v, want 1..%d once each", ids(got), n)
		}
		checkIDs(t, f, got)
		if a, r := value(d.m.ackedRequests), value(d.m.resent); a != n || r != 0 {
			t.Errorf("acknowledged %d, resent %d; want %d, 0", a, r, n)
		}
	})
}

// An upstream that allows one stream at a time (MAX_CONCURRENT_STREAMS 1) while the lane
// re-opens every three requests: each new stream waits until the server ended the half-closed
// one before it, and every request is delivered once, three to a stream.
func TestStreamOneConcurrentStream(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n = 10
		u := newUpstream(t, grpc.MaxConcurrentStreams(1))
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RebalanceRequests = 3
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, n, 1, 100)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
		got := u.received()
		if !slices.Equal(ids(got), seq(1, n)) {
			t.Fatalf("ids %v, want 1..%d once each", ids(got), n)
		}
		checkIDs(t, f, got)
		groups := byStream(got)
		if len(groups) != 4 {
			t.Fatalf("streams %v, want 4", groups)
		}
		for i, g := range groups {
			if want := seq(uint64(3*i+1), uint64(min(3*i+3, n))); !slices.Equal(g.ids, want) {
				t.Errorf("stream %d carried %v, want %v", i+1, g.ids, want)
			}
		}
		if r := value(d.m.resent); r != 0 {
			t.Errorf("resent %d, want 0", r)
		}
	})
}

// One stream at a time, and an upstream that keeps a half-closed stream open after answering
// everything on it: the lane's next stream waits for the slot until the client ends the old
// stream itself, idle for the ack timeout, and then carries the rest.
func TestStreamOneConcurrentStreamKeptOpen(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n = 4
		u := newUpstream(t, grpc.MaxConcurrentStreams(1))
		u.keepOpen = true
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.RebalanceRequests = 2
		// The old stream ends after an ack timeout of silence; the requests on the next one
		// must be answered within one too, and their stream's handler starts only once the
		// old one's has returned (grpc-go's handler quota): 200 ms was once too little beside
		// a loaded machine's other tests, and the request went again on a third stream.
		cfg.AckTimeout = time.Second
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, n, 1, 100)
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
		got := u.received()
		if !slices.Equal(ids(got), seq(1, n)) {
			t.Fatalf("ids %v, want 1..%d once each", ids(got), n)
		}
		checkIDs(t, f, got)
		if groups := byStream(got); len(groups) != 2 {
			t.Errorf("streams %v, want 2", groups)
		}
		u.waitUntil("the old stream cancelled", func() bool { return len(u.canceled) >= 1 })
		if r := value(d.m.resent); r != 0 {
			t.Errorf("resent %d, want 0", r)
		}
	})
}
