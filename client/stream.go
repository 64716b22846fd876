package client

import (
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// Stream mode, on either gRPC transport (grpc-go's ClientStream, or the own one's h2Bidi,
// h2stream.go). Each lane is one sender goroutine of one signal: it keeps one stream open, sends
// on it while its window has room, and replaces it when it ends or is due for re-balancing.
// Every signal has Streams lanes of its own, fed by that signal's queue only (queue.go), so a
// lane that waits for a full window or a signal's in-flight tokens waits for nothing of
// another signal.
// Each stream has a receiver goroutine that matches answers to pending requests by id through
// the ack table, in whatever order they come. The sweeper sends again the requests whose answer
// is later than AckTimeout, and gives up a stream that answered nothing meanwhile.
//
// The window of a stream is a buffered channel: the lane puts a token in before a send, and
// whoever takes the request out of the ack table (the receiver on an answer, the sweeper on a
// timeout, the receiver's final sweep when the stream ends, or the lane itself when its send
// failed) takes one token out with settle. Tokens therefore always equal the requests pending
// on the stream, and a lane waits only while the stream has Window of them.

// stream is one OTEP stream of one signal. Streams are recycled (streampool.go): refs counts
// who may still touch one, and the last to let go gives it back to its destination.
type stream struct {
	d   *Dest
	sig fastpath.Signal
	cs  streamConn // grpc-go's stream, or h2 while it carries one
	h2  *h2Bidi    // transport=otlpgate: the object's own-transport stream, made with it
	// ctx is done once the stream is over: cancelled by the receiver when it ends. It is the
	// stream object's for its whole life (callctx.go), begun again at each open, so that a
	// re-open costs no context; cancel and the open timer (openWait) are made with it, once.
	ctx      *callContext
	release  func() bool // stops ctx following the destination's context
	cancel   func()
	openWait *time.Timer
	// over holds a token once cancel ran: the lane waits on it for a window slot's sake (a
	// stream context's Done is not for waiting, callctx.go). Emptied at each open.
	over   chan struct{}
	slots  chan struct{} // the window: one token per pending request; empty when recycled
	refs   atomic.Int32  // the lane (while the stream is its current one), the receiver, each pending request
	opened int64         // nanotime
	sent   int64         // requests sent; lane only
	bytes  int64         // bytes of the gRPC messages sent, prefixes included; lane only
	pend   atomic.Int32  // requests in the ack table for this stream
	acked  atomic.Bool   // an answer came: the lane's reconnect backoff resets
	broken atomic.Bool   // no more sends: a send failed or the stream ended
	half   atomic.Int64  // nanotime of the client's half-close, 0 while open for sends
	swept  []*request    // the receiver's, for the requests pending when the stream ended

	// The ack clock (Dest.overdue). sendStart is when the lane's SendMsg under way began (0:
	// none); stalled is the total time SendMsg calls on the stream took, time blocked on flow
	// control included; lastAnswer is when the latest answer was read; silent is set when the
	// sweeper gives the stream up for answering nothing within the ack timeout.
	sendStart  atomic.Int64
	stalled    atomic.Int64
	lastAnswer atomic.Int64
	silent     atomic.Bool
}

// settle gives back the window token of a request taken out of the ack table, and the
// request's reference to s: s must not be touched afterwards.
func (s *stream) settle() {
	s.pend.Add(-1)
	s.d.sending.Add(-1)
	select {
	case <-s.slots:
	default:
		panic("BUG: client: stream window released more often than taken")
	}
	<-s.d.inFlight[s.sig]
	s.unref()
}

// lane is one sender of stream mode, for one signal. Its fields belong to its goroutine.
type lane struct {
	d        *Dest
	sig      fastpath.Signal
	cur      *stream
	failures int32 // streams in a row that ended without an answer, or failed to open
	// rebalanced: the lane let its last stream go to re-balance (by requests, bytes or age),
	// not because it failed: the next opens at once, whatever failures says. A stream
	// re-balanced before its first answer (the first one after an outage, taking its first
	// RebalanceBytes at once) must not make the lane wait out the outage's backoff with the
	// next request in hand while the other lanes deliver what was queued after it.
	rebalanced bool
	// wokenEarly: a success of the destination ended the lane's last backoff sleep
	// (Dest.backoffChan); until one of its own streams is answered, it sleeps its backoff out.
	wokenEarly bool
	alone      bool // the latest send was a suspect's: the next waits until it is answered (poison.go)
	timer      *time.Timer
	h2msg      h2Msg // the messages the lane sends on the own transport (h2Bidi.msg)
}

func (l *lane) run() {
	defer l.d.wg.Done()
	for {
		r, idle := l.d.nextUntil(l.sig, l.timer, l.idleDeadline())
		if idle {
			// Past its rebalance age with nothing to send: a quiet signal's stream must not
			// pin its balancer backend until the next burst. The next request opens a new one.
			l.cur.halfClose(endRebalanceAge)
			l.drop()
			l.rebalanced = true
			continue
		}
		if r == nil {
			if l.cur != nil {
				l.drop()
			}
			return
		}
		l.send(r)
	}
}

// idleDeadline is when the lane's open stream reaches its rebalance age (nanotime), 0 when there
// is none to wait for.
func (l *lane) idleDeadline() int64 {
	s := l.cur
	if s == nil || l.d.cfg.RebalanceTimeout <= 0 || s.broken.Load() {
		return 0
	}
	return s.opened + int64(l.d.cfg.RebalanceTimeout)
}

// send writes r on the lane's stream for its signal, opening or replacing the stream as
// needed, and leaves r in the ack table; or finishes r when it cannot be sent.
func (l *lane) send(r *request) {
	d := l.d
	// Build the frame while r is ours: once r is in the table an answer may finish it. The
	// frame holds its own payload reference, so it outlives r if it must.
	if !d.sendsAsIs(r.b) {
		d.drop(r, DropInvalid)
		return
	}
	f, err := newFrame(r.id, r.b.Payload)
	if err != nil {
		d.drop(r, DropInvalid)
		return
	}
	if f.size > d.cfg.MaxSendMsgSize {
		f.unref()
		d.drop(r, DropTooLarge)
		return
	}
	id, size, alone := r.id, r.size, r.suspect
	wire := int64(f.size) + grpcPrefix
	if d.needsProbe(r) {
		d.probe(r.sig) // evidence for its strikes, when nothing else was delivered (poison.go)
	}
	for {
		s := l.stream(r, wire)
		if s == nil {
			f.unref()
			if d.stopping() {
				d.lose(r)
			} else {
				d.drop(r, DropRetryExhausted) // no stream could be opened within its budget
			}
			return
		}
		if alone || l.alone {
			// A suspect goes out alone, and what follows it waits for its answer (poison.go).
			ok, stop := l.isolate(s)
			if stop {
				f.unref()
				d.lose(r)
				return
			}
			if !ok {
				continue // l.stream replaces it
			}
			l.alone = alone
		}
		// The signal's in-flight token first, then the stream's window slot; settle gives back
		// both. Requests pending on draining streams hold tokens, so a re-balance cannot raise
		// what is in flight above MaxInFlight.
		select {
		case d.inFlight[r.sig] <- struct{}{}:
		case <-d.stop:
			f.unref()
			d.lose(r)
			return
		}
		select {
		case s.slots <- struct{}{}:
		case <-s.over:
			<-d.inFlight[r.sig]
			continue // l.stream replaces it
		case <-d.stop:
			<-d.inFlight[r.sig]
			f.unref()
			d.lose(r)
			return
		}
		// A throttle may have come while this request waited for the stream or the window.
		if !d.waitPause(l.timer) {
			<-s.slots
			<-d.inFlight[r.sig]
			f.unref()
			d.lose(r)
			return
		}
		r.attempt++
		r.sentAt, r.stream = notSent, s // the ack clock starts once the transport took it
		s.refs.Add(1)                   // the request's, given back by settle
		s.pend.Add(1)
		d.sending.Add(1)
		d.pending(r)
		if s.broken.Load() {
			// The receiver may have swept the table before the insert: take r back unless it
			// found it (see stream.end). The frame was not marshalled and serves again.
			if r = d.acks.remove(id, s); r != nil {
				s.settle()
				r.attempt--
				continue
			}
			f.unref()
			return
		}
		// SendMsg blocks while the stream's flow-control window (or the connection's) is
		// closed; requests already handed over wait behind the same window meanwhile. The time
		// is the stream's stall, credited to every request pending on it (Dest.overdue).
		if s.h2 != nil {
			s.h2.msg = &l.h2msg
		}
		start := nanotime()
		s.sendStart.Store(start)
		err := s.cs.SendMsg(f)
		end := nanotime()
		stalled := s.stalled.Add(end - start)
		s.sendStart.Store(0)
		f.unref()
		if err != nil {
			// io.EOF: the stream is over and the receiver will read why; anything else is
			// ours, and ends the stream too. Either way the bytes may have left: a re-send.
			s.broken.Store(true)
			s.cancel()
			if err != io.EOF {
				d.noteError(err)
			}
			if r := d.acks.remove(id, s); r != nil {
				s.settle()
				d.resend(r)
			}
			return
		}
		d.acks.stamp(id, s, end, stalled)
		s.sent++
		s.bytes += wire
		d.m.sentRequests.Inc()
		d.m.sentBytes.Add(float64(size))
		return
	}
}

// grpcPrefix is the length prefix gRPC puts before each message on the stream: what an L7
// balancer counts as the stream's body includes it.
const grpcPrefix = 5

// stream returns the lane's open stream: the current one unless it ended or is due for
// re-balancing, else a new one. wire is what r adds to the stream's body, for RebalanceBytes.
// nil when the destination stops first, or when no stream opens before r's retry budget runs
// out.
func (l *lane) stream(r *request, wire int64) *stream {
	d := l.d
	sig := l.sig
	if s := l.cur; s != nil {
		if s.acked.Load() {
			l.failures = 0 // the upstream answers: a re-balance or a break re-opens at once
			l.wokenEarly = false
		}
		over := s.broken.Load() || s.ctx.Err() != nil
		switch {
		case over:
			if !s.acked.Load() {
				l.failures++
			}
			l.drop()
		case d.cfg.RebalanceRequests > 0 && s.sent >= d.cfg.RebalanceRequests:
			s.halfClose(endRebalanceRequests)
			l.drop()
			l.rebalanced = true
		case d.cfg.RebalanceBytes > 0 && s.bytes > 0 && s.bytes+wire > d.cfg.RebalanceBytes:
			// A balancer that caps a request's body (nginx's client_max_body_size) counts the
			// whole stream: re-open before this request would take it past the cap. A request
			// larger than the cap on its own still goes, alone on a fresh stream.
			s.halfClose(endRebalanceBytes)
			l.drop()
			l.rebalanced = true
		case d.cfg.RebalanceTimeout > 0 && nanotime()-s.opened >= int64(d.cfg.RebalanceTimeout):
			s.halfClose(endRebalanceAge)
			l.drop()
			l.rebalanced = true
		default:
			return s
		}
	}
	for {
		if l.failures > 0 && !l.rebalanced {
			// The stream before broke without a single answer (or did not open): do not spin
			// against an upstream that accepts streams and then fails them.
			// The destination's next success ends the sleep (the upstream answers again), once per
			// lane until one of its own streams is answered: a lane whose streams keep breaking
			// while others are answered must not retry at the pace of their answers.
			var wake chan struct{}
			if !l.wokenEarly {
				wake = d.backoffChan()
			}
			if !d.sleep(l.timer, d.cfg.backoff(l.failures), wake) {
				return nil
			}
			if wake != nil {
				select {
				case <-wake:
					l.wokenEarly = true
				default:
				}
			}
		}
		// A failure from here on is one: a stream that cannot be opened again backs off.
		// failures is kept: a stream that opened and was let go unanswered is no evidence that
		// the upstream answers.
		l.rebalanced = false
		var wait time.Duration
		if d.cfg.RetryMaxElapsed > 0 {
			wait = max(time.Duration(r.taken+int64(d.cfg.RetryMaxElapsed)-nanotime()), time.Millisecond)
		}
		s, err := d.openStream(sig, wait)
		if err == nil {
			l.cur = s
			return s
		}
		if d.stopping() {
			return nil
		}
		l.failures++
		d.noteError(err)
		d.log.Warn("cannot open stream", "signal", sig.String(), "err", d.upstreamMessage(err), "failures", l.failures)
		if d.expired(r, d.cfg.backoff(l.failures)) {
			return nil
		}
	}
}

// backoffChan returns the channel d's next success closes, and marks a
// lane as sleeping its backoff until then.
func (d *Dest) backoffChan() chan struct{} {
	d.backoffMu.Lock()
	defer d.backoffMu.Unlock()
	if d.backoffWake == nil {
		d.backoffWake = make(chan struct{})
	}
	d.backoffWaiting.Store(true)
	return d.backoffWake
}

// answeredAfterOutage wakes every lane sleeping its reconnect backoff: a request succeeded.
func (d *Dest) answeredAfterOutage() {
	d.backoffMu.Lock()
	defer d.backoffMu.Unlock()
	if d.backoffWaiting.Load() {
		d.backoffWaiting.Store(false)
		close(d.backoffWake)
		d.backoffWake = nil
	}
}

// drop forgets the lane's current stream and gives back the lane's reference to it. An answer
// on it resets the lane's reconnect backoff (a stream let go idle is not looked at again).
func (l *lane) drop() {
	s := l.cur
	if s.acked.Load() {
		l.failures = 0
		l.wokenEarly = false
	}
	l.cur = nil
	s.unref()
}

var errOpenTimeout = errors.New("client: no connection to the upstream within the request's retry budget")

// halfClose ends the sending side of s for re-balancing; its receiver keeps reading answers
// until the server closes the stream. Called by the lane, the only sender on s.
func (s *stream) halfClose(how int) {
	s.half.Store(nanotime())
	s.d.wakeSweep()
	s.broken.Store(true)
	s.d.m.streamsEnded[how].Inc()
	if err := s.cs.CloseSend(); err != nil {
		s.cancel()
	}
}

// openStream opens a stream for sig. The call waits for the connection to be ready (streams are
// opened with WaitForReady), but no longer than wait when wait is positive: past it the attempt
// fails, so that the lane can give up on requests whose budget ran out. On the own transport
// (h2stream.go) it dials once when no connection takes new streams, and waits for a stream slot
// the server allows within the same bound. The stream comes with the lane's reference and the
// receiver's.
func (d *Dest) openStream(sig fastpath.Signal, wait time.Duration) (*stream, error) {
	s := d.getStream()
	select {
	case <-s.over: // the last stream's
	default:
	}
	s.ctx.begin()
	if wait > 0 {
		s.openWait.Reset(wait)
	}
	var cs streamConn
	var err error
	if s.h2 != nil {
		if err = s.h2.open(s.ctx, sig); err == nil {
			cs = s.h2
		}
	} else {
		cs, err = d.conn.NewStream(s.ctx, &streamDesc, d.methods[sig], d.streamOpts...)
	}
	if wait > 0 && !s.openWait.Stop() {
		// The wait ran out: the stream, if one opened at that instant, is cancelled with it.
		// The timer's function may still be running: the stream object is not used again.
		s.cancel()
		s.ctx.end()
		s.release()
		if err == nil {
			err = errOpenTimeout
		}
		return nil, err
	}
	if err != nil {
		s.cancel()
		s.ctx.end()
		d.putStream(s)
		return nil, err
	}
	s.sig, s.cs = sig, cs
	s.opened = nanotime()
	s.refs.Store(2)
	d.streams.mu.Lock()
	d.streams.set[s] = struct{}{}
	d.streams.mu.Unlock()
	d.m.streamsOpened.Inc()
	d.receive(s)
	return s, nil
}

// recv reads answers into resp until the stream ends, then settles what is still pending on
// it. It runs on a receiver goroutine (streampool.go).
func (s *stream) recv(resp *otepv1.ExportResponse) {
	d := s.d
	for {
		if err := s.cs.RecvMsg(resp); err != nil {
			s.end(err)
			return
		}
		r := d.acks.remove(resp.Id, s)
		if r == nil {
			d.m.unknownAcks.Inc()
			continue
		}
		now := nanotime()
		s.lastAnswer.Store(now)
		s.acked.Store(true)
		if r.sentAt != notSent {
			d.m.ackLatency.Observe(float64(now-r.sentAt) / 1e9)
		} else {
			d.m.ackLatency.Observe(0) // answered before the lane saw its SendMsg return
		}
		s.settle()
		d.result(r, resp.ResultCode, resp.RetryDelayMs)
	}
}

// end handles the end of the stream: err is io.EOF when the server closed it cleanly. The
// requests still pending were not answered: they are re-sent (RetryOnReconnect), or dropped when
// the server's status says sending again cannot help.
func (s *stream) end(err error) {
	d := s.d
	v, delay := classify(err, true)
	if v == verdictThrottle && !d.stopping() {
		// Before the lane can see the end: it must find the pause when it opens the next stream.
		d.throttle(delay)
	}
	s.broken.Store(true)
	s.cancel() // the lane learns that the stream is over
	d.streams.mu.Lock()
	delete(d.streams.set, s)
	d.streams.mu.Unlock()
	if d.stopping() {
		return // Shutdown counts what is left in the table
	}
	if !errors.Is(err, io.EOF) && !s.silent.Load() && s.half.Load() == 0 {
		d.noteError(err) // not the stream's own end: a silent one was noted by the sweeper
	}
	if v == verdictUnserved {
		d.notServed(s.sig, err)
	}
	// The sweep runs after broken was set: a lane that inserts later sees broken and takes its
	// request back itself; one that inserted before is swept here. remove decides who wins.
	s.swept = d.acks.takeIf(func(r *request) bool { return r.stream == s }, s.swept[:0])
	pending := len(s.swept)
	internal := d.endedInternal(err, v)
	for i, r := range s.swept {
		s.swept[i] = nil
		s.settle() // not the last reference: the receiver still holds one
		switch {
		case v == verdictReject:
			d.reject(r, err)
		case v == verdictUnserved:
			d.retry(r, RetryFailed) // after the backoff: at once would spin against the upstream
		case internal:
			d.suspect(r, pending == 1) // perhaps the request the upstream cannot decode
		default:
			d.resend(r)
		}
	}
	clean := errors.Is(err, io.EOF)
	switch {
	case s.half.Load() != 0 && pending == 0 && !s.silent.Load():
		// The normal end of a re-balanced stream (closed by the server, or by the sweeper
		// when the server kept it open), counted when it was half-closed.
		return
	case s.silent.Load():
		d.m.streamsEnded[endAckTimeout].Inc()
		d.log.Warn("stream answered nothing within the ack timeout: given up, its requests sent again on a new one",
			"signal", s.sig.String(), "ack_timeout", d.cfg.AckTimeout, "unanswered", pending,
			"resend", v != verdictReject && d.cfg.RetryOnReconnect)
		return
	case clean:
		d.m.streamsEnded[endClosed].Inc()
	default:
		d.m.streamsEnded[endBroken].Inc()
	}
	if (!clean || pending > 0) && v != verdictUnserved { // notServed said it once
		d.log.Warn("stream ended", "signal", s.sig.String(), "err", d.upstreamMessage(err), "unanswered", pending,
			"resend", v != verdictReject && d.cfg.RetryOnReconnect)
	}
}

// sweep takes out of the ack table the requests whose answer is overdue and sends them again
// (unanswered), gives up the streams that answered nothing within the ack timeout (their other
// requests are sent again too, when the receiver sees the stream end), and ends the re-balanced
// streams that the server leaves open after everything on them was answered or timed out.
// While there is nothing of that to look at it sleeps (sleepSweep) until the next send or
// half-close wakes it, so that an idle destination wakes no thread.
func (d *Dest) sweep() {
	defer d.wg.Done()
	tick := min(max(d.cfg.AckTimeout/4, time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	var buf []*request
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.sweeps.Add(1)
		now := nanotime()
		cutoff := now - int64(d.cfg.AckTimeout)
		buf = d.acks.takeIf(func(r *request) bool { return d.overdue(r, now) }, buf[:0])
		for i, r := range buf {
			s := r.stream
			if s.lastAnswer.Load() < r.sentAt && !s.silent.Swap(true) {
				// Nothing came back on s since r went out, an ack timeout ago: the stream (or
				// the connection under it) is what is wrong, as likely as the request. Ending
				// it sends everything pending on it again on a new one. While s answers other
				// requests, r alone is sent again. r holds a reference: s is still this stream.
				s.broken.Store(true)
				s.cancel()
			}
			s.settle()
			d.unanswered(r)
			buf[i] = nil
		}
		// Cancelled under the lock: a stream leaves the set before it can be recycled, so
		// every stream seen here is still the one that was looked at.
		d.streams.mu.Lock()
		for s := range d.streams.set {
			if h := s.half.Load(); h != 0 && h <= cutoff && s.pend.Load() == 0 {
				s.cancel()
			}
		}
		d.streams.mu.Unlock()
		if d.settledSweep() {
			t.Stop()
			if !d.sleepSweep() {
				return
			}
			t.Reset(tick)
		}
	}
}

// settledSweep reports whether the sweep has nothing to look at until a request is sent or a
// stream half-closed: the ack table is empty and no open stream is half-closed. Sweep
// goroutine only.
func (d *Dest) settledSweep() bool {
	if d.acks.len() != 0 {
		return false
	}
	d.streams.mu.Lock()
	defer d.streams.mu.Unlock()
	for s := range d.streams.set {
		if s.half.Load() != 0 {
			return false
		}
	}
	return true
}

// sleepSweep waits until wakeSweep and returns true, or returns false when the destination
// stops. asleep is set before the table and the streams are looked at again: a sender inserts
// into the table (or stores half) before it reads asleep in wakeSweep, so either this look
// sees what it did, or that read sees asleep and sends the wake-up. A wake-up left in the
// channel by a send during the look costs one tick later. Sweep goroutine only.
func (d *Dest) sleepSweep() bool {
	d.sweepAsleep.Store(true)
	if !d.settledSweep() {
		d.sweepAsleep.Store(false)
		return true
	}
	select {
	case <-d.stop:
		return false
	case <-d.sweepWake:
		return true
	}
}

// pending puts r, about to be sent, in the ack table, and wakes the sweep to watch it. Safe for
// concurrent use.
func (d *Dest) pending(r *request) {
	d.acks.insert(r)
	d.wakeSweep()
}

// wakeSweep wakes the sweep if it sleeps: a request went into the ack table or a stream was
// half-closed. One atomic load when the sweep is awake, as it is under traffic. Safe for
// concurrent use.
func (d *Dest) wakeSweep() {
	if d.sweepAsleep.Load() && d.sweepAsleep.CompareAndSwap(true, false) {
		select {
		case d.sweepWake <- struct{}{}:
		default:
		}
	}
}

// overdue reports whether the answer to r, in the ack table, is later than AckTimeout at now.
// The clock starts when the transport took the request (SendMsg returned), and the time its
// stream spent in SendMsg since does not count: a send blocked on flow control means the
// upstream's window is closed, and the requests handed over before it wait behind the same
// window; that wait is the transport's, not the time the upstream takes to answer. Runs under
// r's shard lock.
func (d *Dest) overdue(r *request, now int64) bool {
	if r.sentAt == notSent {
		return false
	}
	s := r.stream
	// sendStart before stalled: a send that ends between the two loads is then credited twice
	// (a later timeout), never missed.
	var credit int64
	if st := s.sendStart.Load(); st != 0 {
		credit = now - max(st, r.sentAt)
	}
	credit += s.stalled.Load() - r.stalledAt
	return now-r.sentAt-credit >= int64(d.cfg.AckTimeout)
}
