package grpcserver

import (
	"encoding/binary"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/pool"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// The OTEP StreamExporter on otlpgate's own transport. A stream is an h2Stream like a unary
// call, and what grpc-go's path (otep.go) does on a loop goroutine of each stream happens here
// on the connection's reader, under the connection's mu, as each message completes:
//
//  1. A message's prefix reserves its length from the intake limiter (the connection's account
//     and -intake.max-bytes, as a unary call's does); its bytes are collected into a pooled
//     buffer as they come, and the stream's window given back as they are taken in. A message
//     the limiter has no room for is read past and answered FailedRetryable with the
//     limiter's wait, as grpc-go's path answers it once admission refuses it (streamNoRoom).
//  2. A whole message is scanned and admitted on the reader, and answered with an
//     ExportResponse carrying its id and result code; the answers of one read leave in the
//     read's one write. With -ack=upstream a waiter goroutine answers it once its batch is
//     delivered, so answers may leave out of request order.
//  3. Reading stops (the bytes that still come, at most the stream's window, wait in the
//     stream's backlog, and no window is given back for them) while more than
//     -grpc.stream.max-unsent answers wait for the client's window, or more than
//     -grpc.stream.window requests are owed an answer (-ack=upstream; blocked). When no answer is taken within -grpc.stream.answer-timeout the
//     stream alone ends, RESOURCE_EXHAUSTED: unlike grpc-go's, this transport can free one
//     stream's answers without closing the connection under the others.
//  4. The stream ends, after the answers it owes (with -ack=upstream, once the upstream
//     answered), with the status grpc-go's path ends it with: OK when the client closed its
//     side, at -grpc.stream.max-age (at once, an unfinished message dropped unanswered),
//     after -grpc.stream.max-requests, at shutdown (drainStreams); UNAVAILABLE and RetryInfo
//     under sustained overload; DEADLINE_EXCEEDED when its grpc-timeout passes
//     (streamDeadlineLocked); the receive error (too large, a broken message, no room for a message
//     whose id is not its first field) otherwise. Its trailers go after its last answer, and a client that
//     did not close its side is reset with NO_ERROR, as grpc-go does.
type otepStream struct {
	on      bool  // the call is a StreamExporter stream
	hdrSent bool  // the response headers went out
	taken   int64 // requests taken (-grpc.stream.max-requests)
	waiters int   // requests waiting for their upstream (-ack=upstream)
	ending  bool  // the stream's end is decided: its trailers follow the answers it owes
	endErr  error // the status it ends with; nil: OK
	eos     bool  // the client's END_STREAM came while bytes waited in the backlog
	stalled bool  // more than -grpc.stream.max-unsent answers wait: counted once, and timed
	// ends are where each answer not yet sent ends in the stream's parked bytes.
	ends []int
	// A message the intake limiter had no room for is read past, not kept: skip bytes of it
	// are still to come; its first bytes are kept in peek for its id.
	skip    int
	peek    [1 + binary.MaxVarintLen64]byte
	peekN   int
	backlog *[]byte // bytes that came while reading was stopped (pooled)
	backOff int     // the part of backlog taken in

	stalledAt, agedAt    time.Time
	stallTimer, ageTimer *time.Timer // made once per h2Stream, re-armed per use

	// The stream's kept header fields, for looking its tenant up again (-intake.tenant-idle).
	meta    fieldMeta
	metaBuf []byte
}

// recycled is the state a new stream starts from: what may be reused, nothing else.
func (os *otepStream) recycled() otepStream {
	return otepStream{ends: os.ends[:0], stallTimer: os.stallTimer, ageTimer: os.ageTimer,
		meta: fieldMeta{fields: os.meta.fields[:0]}, metaBuf: os.metaBuf[:0]}
}

// release gives back what the stream holds beyond its message.
func (os *otepStream) release() {
	os.putBacklog()
	if os.ageTimer != nil {
		os.ageTimer.Stop()
	}
	if os.stallTimer != nil {
		os.stallTimer.Stop()
	}
	os.stalled, os.waiters = false, 0
}

func (os *otepStream) putBacklog() {
	if os.backlog != nil {
		pool.PutBytes(os.backlog)
		os.backlog, os.backOff = nil, 0
	}
}

var (
	errUnexpectedEOF = status.Error(codes.Internal, io.ErrUnexpectedEOF.Error())

	streamDeadlines = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_grpc_stream_deadlines_total",
		Help: "OTEP streams of -grpc.transport=otlpgate ended with DEADLINE_EXCEEDED (or reset with CANCEL while answers waited for the client's window) because the grpc-timeout their client sent passed, as grpc-go ends them; answers not yet sent are dropped, their requests the client's to send again.",
	})
	streamAnswerTimeouts = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_grpc_stream_answer_timeouts_total",
		Help: "OTEP streams of -grpc.transport=otlpgate ended with RESOURCE_EXHAUSTED because none of their -grpc.stream.max-unsent answers was taken within -grpc.stream.answer-timeout (their requests are the client's to send again); grpc-go's transport closes the connection instead (otlpgate_grpc_closed_connections_total{reason=\"answers_not_taken\"}).",
	})
)

// openStream begins a StreamExporter stream whose headers were accepted.
func (c *h2Conn) openStream(st *h2Stream, fields []h2.Field) {
	if c.s.cfg.Tenants != nil {
		st.os.keepMeta(fields)
	}
	if c.s.draining.Load() {
		// Opened after the shutdown began, before the last GOAWAY: it ends at once, as an
		// idle stream does, and is counted the same.
		drainedStreams.Inc()
		c.endStreamLocked(st, nil)
		return
	}
	c.armDeadline(st)
	if age := c.s.cfg.StreamMaxAge; age > 0 {
		st.os.agedAt = time.Now().Add(age)
		if st.os.ageTimer == nil {
			st.os.ageTimer = time.AfterFunc(age, func() { c.streamAged(st) })
		} else {
			st.os.ageTimer.Reset(age)
		}
	}
}

// keepMeta copies the kept fields that are not pseudo-fields: the tenant's headers.
func (os *otepStream) keepMeta(fields []h2.Field) {
	buf, kept := os.metaBuf[:0], os.meta.fields[:0]
	for _, f := range fields {
		if f.Name[0] != ':' {
			buf = append(buf, f.Value...)
			kept = append(kept, h2.Field{Name: f.Name, Keep: f.Keep, Sensitive: f.Sensitive})
		}
	}
	// The values are views of buf, set once buf stopped growing.
	off, j := 0, 0
	for _, f := range fields {
		if f.Name[0] != ':' {
			kept[j].Value = buf[off : off+len(f.Value) : off+len(f.Value)]
			off += len(f.Value)
			j++
		}
	}
	os.metaBuf, os.meta.fields = buf, kept
}

// streamAged ends a stream at -grpc.stream.max-age; it runs on the stream's timer.
func (c *h2Conn) streamAged(st *h2Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed || st.id == 0 || !st.os.on || st.os.ending || time.Now().Before(st.os.agedAt) {
		return // a late run: the stream ended, or the timer was armed again for the next one
	}
	ctr.rebalanceAge.Inc()
	c.endStreamLocked(st, nil)
	c.flushAsyncLocked()
}

// streamDeadlineLocked ends a stream whose grpc-timeout passed (deadlinePassed), whatever it
// is doing: reading, waiting for the upstream (-ack=upstream) or for the client's window, or
// ending after the answers it owes. Its trailers go at once with DEADLINE_EXCEEDED, and a
// client whose side is still open is reset with NO_ERROR, as grpc-go's handler ends a call
// whose deadline passed; when answers still wait for the client's window (the trailers cannot
// pass them) it is reset with CANCEL, as grpc-go's transport resets a call at its deadline.
// grpc-go does one or the other, whichever of its two timers comes first; this transport
// always the first it can. What the stream still owed is dropped: an unfinished message, and
// the answers not sent (their requests were admitted; the client, whose call ended, sends
// them again).
func (c *h2Conn) streamDeadlineLocked(st *h2Stream) {
	os := &st.os
	streamDeadlines.Inc()
	c.s.log.Info("grpc: OTEP stream ended: its grpc-timeout passed",
		"peer", c.peer, "timeout", st.timeout, "unsent", len(os.ends), "waiting", os.waiters)
	gen := st.gen
	if !st.localDone {
		os.waiters = 0 // a waiter that comes back finds the stream gone (its gen changed)
		if os.ending {
			os.endErr = errDeadlineExceeded
			c.trailersLocked(st)
		} else {
			c.endStreamLocked(st, errDeadlineExceeded)
		}
	}
	if st.gen == gen && st.id != 0 {
		// The trailers wait behind answers the client's window holds back, or went out to a
		// client whose side stays open for nothing else: either way the stream is over.
		code := http2.ErrCodeCancel
		if st.localDone {
			code = http2.ErrCodeNo
		}
		c.resetLocked(st.id, code)
	}
}

// flushAsyncLocked writes what a goroutine other than serve added to out, and closes a
// connection whose last stream this ended after its last GOAWAY (serve, waiting in Read,
// would not notice).
func (c *h2Conn) flushAsyncLocked() {
	c.flushLocked()
	if c.mu.final && len(c.mu.streams) == 0 {
		c.raw.Close()
	}
}

// drainStreams ends every stream of the connection at shutdown, after the answers each owes.
// Safe for concurrent use.
func (c *h2Conn) drainStreams() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	for i := 0; i < len(c.mu.streams); {
		st := c.mu.streams[i]
		if st.os.on && !st.os.ending && !st.answered {
			drainedStreams.Inc()
			c.endStreamLocked(st, nil)
		}
		if i < len(c.mu.streams) && c.mu.streams[i] != st {
			continue // dropped: another took its place at i
		}
		i++
	}
	c.flushAsyncLocked()
}

// blocked reports whether the stream stops reading, at the point grpc-go's path stops: with
// -ack=accept once an answer waits beyond the -grpc.stream.max-unsent the client has not
// taken (grpc-go's loop waits to send it); with -ack=upstream once the requests owed an
// answer, those waiting for their upstream and those answered beyond max-unsent, exceed
// -grpc.stream.window (grpc-go's loop waits for a token of its window).
func (c *h2Conn) blocked(st *h2Stream) bool {
	over := len(st.os.ends) - c.s.cfg.StreamMaxUnsent
	if c.s.adm.AckUpstream() {
		return st.os.waiters+max(over, 0) > c.s.cfg.StreamWindow
	}
	return over > 0
}

// streamData takes in a DATA frame's bytes of a stream; flow is what the frame counted in the
// windows (padding included), end its END_STREAM.
func (c *h2Conn) streamData(st *h2Stream, data []byte, flow int64, end bool) error {
	st.unacked += flow - int64(len(data)) // padding: nothing to take in
	st.dataLen += int64(len(data))
	if st.contentLen >= 0 && st.dataLen > st.contentLen {
		return errMalformed // §8.1.1
	}
	gen := st.gen
	switch {
	case st.os.ending:
		st.unacked += int64(len(data)) // after the end was decided: dropped
	case st.os.backlog != nil || c.blocked(st):
		st.os.appendBacklog(data)
		c.resumeLocked(st) // reads on at once if what blocked it passed
		if st.gen != gen {
			return nil
		}
	default:
		n := c.consume(st, data)
		if st.gen != gen {
			return nil // ended and forgotten
		}
		st.unacked += int64(n)
		if rest := data[n:]; len(rest) > 0 {
			if st.os.ending {
				st.unacked += int64(len(rest))
			} else {
				st.os.appendBacklog(rest)
			}
		}
	}
	if end {
		return c.streamEnd(st)
	}
	c.streamWindowLocked(st)
	return nil
}

// appendBacklog keeps b for when the stream reads again. The client cannot send more than the
// window it was given, so the backlog is bounded by it.
func (os *otepStream) appendBacklog(b []byte) {
	if os.backlog == nil {
		os.backlog = pool.GetBytes(max(len(b), 16<<10))
	}
	buf := *os.backlog
	if len(buf)+len(b) > cap(buf) {
		live := len(buf) - os.backOff
		nb := pool.GetBytes(max(2*(live+len(b)), 16<<10))
		*nb = append(append((*nb)[:0], buf[os.backOff:]...), b...)
		pool.PutBytes(os.backlog)
		os.backlog, os.backOff = nb, 0
		return
	}
	*os.backlog = append(buf, b...)
}

// streamWindowLocked gives back the stream's window for what was taken in, a quarter of the
// initial window at a time.
func (c *h2Conn) streamWindowLocked(st *h2Stream) {
	if !st.remoteDone && !st.os.ending && st.unacked >= int64(c.s.cfg.InitialWindowSize)/4 {
		*c.mu.out = appendWindowUpdate(*c.mu.out, st.id, uint32(st.unacked))
		st.recvWin += st.unacked
		st.unacked = 0
	}
}

// consume takes in the messages of data as far as the stream reads, and returns how many
// bytes it took. Each whole message is admitted and answered (streamMessage).
func (c *h2Conn) consume(st *h2Stream, data []byte) int {
	off := 0
	for off < len(data) && !st.os.ending && !c.blocked(st) {
		if st.os.skip > 0 {
			k := min(len(data)-off, st.os.skip)
			st.os.peekN += copy(st.os.peek[st.os.peekN:], data[off:off+k])
			st.os.skip -= k
			off += k
			if st.os.skip == 0 {
				c.streamNoRoom(st)
			}
			continue
		}
		if st.msgLen < 0 {
			k := copy(st.pre[st.preN:], data[off:])
			st.preN += k
			off += k
			if st.preN < len(st.pre) {
				break
			}
			if _, err := st.checkPrefix(c); err != nil {
				if err == errNoRoom && st.msgLen > 0 {
					// Refused on its own, as grpc-go's path refuses it once read (admission
					// finds no room): its bytes are read past, and its id answered.
					st.os.skip, st.os.peekN = st.msgLen, 0
					st.msgLen, st.preN = -1, 0
					continue
				}
				if err == errNoRoom {
					err = c.s.busy()
				}
				c.endStreamLocked(st, err)
				break
			}
			if st.msgLen == 0 {
				c.streamMessage(st)
			}
			continue
		}
		k := min(len(data)-off, st.msgLen-len(*st.msg))
		*st.msg = append(*st.msg, data[off:off+k]...)
		off += k
		if len(*st.msg) == st.msgLen {
			c.streamMessage(st)
		}
	}
	return off
}

// streamMessage admits a whole message of the stream and answers it (or hands it to a waiter:
// -ack=upstream), then ends the stream if that is due, as grpc-go's loop does after each
// request.
func (c *h2Conn) streamMessage(st *h2Stream) {
	s := c.s
	body := *st.msg
	if st.compressed {
		plain, err := c.decompress(st)
		if err != nil {
			// As grpc-go's path ends a stream whose message did not inflate (the inflate
			// budget's refusal as busy: the client sends it again, after the delay).
			c.endStreamLocked(st, err)
			return
		}
		body = plain
	}
	if st.from.Tenant.Expired() && s.cfg.Tenants != nil {
		// The stream was quiet longer than -intake.tenant-idle: its tenant left the table.
		// Looked up again it is interned anew; a refusal keeps the old one (otep.go).
		c.meta.fields = st.os.meta.fields
		if o, err := s.originMeta(&c.meta, c.peer); err == nil {
			st.from = o
		}
		c.meta.fields = nil
	}
	sc, b, reason, id, delay := s.admitOTEP(kindOTEPStream, st.from, st.sig, body)
	if reason == admission.Busy {
		delay = retryDelayMs(s.adm.BusyDelay())
	}
	st.releaseMsg() // admission copied the request
	if b != nil {
		c.awaitStream(st, b, id, max(sc.Items, 0))
	} else {
		c.streamAnswerLocked(st, id, resultOf(reason), delay)
	}
	c.afterMessage(st, reason)
}

// streamNoRoom answers a message the intake limiter had no room for, read past: FailedRetryable
// with the limiter's wait, as grpc-go's path answers it (admission refuses it, Busy). Its id is
// its first field, as every OTEP client writes it; a message whose id is not there ends the
// stream with RESOURCE_EXHAUSTED and RetryInfo instead.
func (c *h2Conn) streamNoRoom(st *h2Stream) {
	s := c.s
	ctr.refuse(kindOTEPStream, st.sig, admission.Busy, 0)
	p := st.os.peek[:st.os.peekN]
	num, typ, n := protowire.ConsumeTag(p)
	if n <= 0 || num != 1 || typ != protowire.VarintType {
		c.endStreamLocked(st, s.busy())
		return
	}
	id, m := protowire.ConsumeVarint(p[n:])
	if m <= 0 {
		c.endStreamLocked(st, s.busy())
		return
	}
	c.streamAnswerLocked(st, id, otepv1.ResultCode_FailedRetryable, retryDelayMs(s.adm.BusyDelay()))
	c.afterMessage(st, admission.Busy)
}

// afterMessage ends the stream after a message answered for reason, when that is due.
func (c *h2Conn) afterMessage(st *h2Stream, reason admission.Reason) {
	s := c.s
	st.os.taken++
	switch {
	case reason.Backpressure() && s.overloaded():
		ctr.overload[kindOTEPStream].Inc()
		c.endStreamLocked(st, s.unavailable(msgOverloaded))
	case s.draining.Load():
		drainedStreams.Inc()
		c.endStreamLocked(st, nil)
	case s.cfg.StreamMaxRequests > 0 && st.os.taken >= s.cfg.StreamMaxRequests:
		ctr.rebalanceReq.Inc()
		c.endStreamLocked(st, nil)
	}
}

// awaitStream answers request id, admitted into b, once the upstream answered
// (-ack=upstream), on a goroutine of its own.
func (c *h2Conn) awaitStream(st *h2Stream, b *pipeline.Batch, id uint64, items int) {
	st.os.waiters++
	gen, sig := st.gen, st.sig
	c.async.Add(1)
	go func() {
		defer c.async.Done()
		reason := ctr.await(c.ctx, kindOTEPStream, sig, b, items)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.mu.closed || st.gen != gen {
			return // reset by the client, or the connection ended
		}
		st.os.waiters--
		c.streamAnswerLocked(st, id, resultOf(reason), 0)
		if st.os.ending {
			c.trailersLocked(st)
		} else {
			c.resumeLocked(st)
		}
		c.flushAsyncLocked()
	}()
}

// streamAnswerLocked answers request id of the stream: its ExportResponse is appended to the
// stream's parked bytes and sent as far as the windows allow.
func (c *h2Conn) streamAnswerLocked(st *h2Stream, id uint64, code otepv1.ResultCode, delay uint64) {
	if !st.os.hdrSent {
		*c.mu.out = h2RespHeaders.Append(*c.mu.out, st.id)
		st.os.hdrSent = true
	}
	r := &c.resp
	r.Id, r.ResultCode, r.RetryDelayMs = id, code, delay
	n := r.SizeVT()
	p := append(st.parked, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	p = append(p, make([]byte, n)...)
	if _, err := r.MarshalToSizedBufferVT(p[len(p)-n:]); err != nil {
		panic("BUG: grpc: an OTEP answer does not marshal: " + err.Error())
	}
	st.parked = p
	st.os.ends = append(st.os.ends, len(p))
	st.isPark = true
	c.strikes = 0 // an answer forgives early PINGs, as grpc-go's data does
	c.sendStreamLocked(st)
	if !st.os.stalled && len(st.os.ends) > c.s.cfg.StreamMaxUnsent {
		c.stallLocked(st) // one answer more than the client may leave untaken, as grpc-go counts
	}
}

// sendStreamLocked sends what the windows allow of the stream's parked answers, then, once
// all went out and the end is decided, its trailers.
func (c *h2Conn) sendStreamLocked(st *h2Stream) {
	out := *c.mu.out
	for st.sent < len(st.parked) {
		n := min(int64(len(st.parked)-st.sent), c.mu.sendConn, st.sendWin, int64(c.mu.peerMaxFrame))
		if n <= 0 {
			break
		}
		end := st.sent + int(n)
		out = appendDataFrame(out, st.id, false, st.parked[st.sent:end])
		c.mu.sendConn -= n
		st.sendWin -= n
		st.sent = end
	}
	*c.mu.out = out
	if st.sent > 0 {
		// Forget what went out: the answers left move to the front.
		k := 0
		for k < len(st.os.ends) && st.os.ends[k] <= st.sent {
			k++
		}
		m := copy(st.os.ends, st.os.ends[k:])
		st.os.ends = st.os.ends[:m]
		for i := range st.os.ends {
			st.os.ends[i] -= st.sent
		}
		st.parked = st.parked[:copy(st.parked, st.parked[st.sent:])]
		st.sent = 0
	}
	if len(st.parked) > 0 {
		return
	}
	st.isPark = false
	if st.trailers != nil {
		*c.mu.out = st.trailers.Append(*c.mu.out, st.id)
		st.trailers = nil
		st.answered, st.localDone = true, true
		c.finishLocked(st)
	}
}

// stallLocked notes that the stream stopped reading for answers the client does not take,
// and times the wait.
func (c *h2Conn) stallLocked(st *h2Stream) {
	streamStalls.Inc()
	st.os.stalled = true
	st.os.stalledAt = time.Now()
	d := c.s.cfg.StreamAnswerTimeout
	if st.os.stallTimer == nil {
		st.os.stallTimer = time.AfterFunc(d, func() { c.stallExpired(st) })
	} else {
		st.os.stallTimer.Reset(d)
	}
}

// stallExpired ends a stream none of whose answers was taken within -grpc.stream.answer-timeout;
// it runs on the stream's timer. The answers not taken are dropped with it: the client sends
// their requests again.
func (c *h2Conn) stallExpired(st *h2Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed || st.id == 0 || !st.os.stalled || time.Since(st.os.stalledAt) < c.s.cfg.StreamAnswerTimeout {
		return // a late run: the stream read on, or ended
	}
	streamAnswerTimeouts.Inc()
	c.s.log.Warn("grpc: OTEP stream ended: none of its answers was taken within -grpc.stream.answer-timeout",
		"peer", c.peer, "unsent", len(st.os.ends), "timeout", c.s.cfg.StreamAnswerTimeout)
	st.parked, st.sent, st.isPark = st.parked[:0], 0, false
	st.os.ends = st.os.ends[:0]
	st.os.waiters = 0 // their answers would not be taken either
	st.os.ending = false
	c.endStreamLocked(st, errAnswersNotTaken)
	c.flushAsyncLocked()
}

// resumeLocked reads on from the backlog once the stream may (its answers taken, its requests
// answered by the upstream), and acts on an END_STREAM that waited behind it.
func (c *h2Conn) resumeLocked(st *h2Stream) {
	os := &st.os
	if st.answered {
		return
	}
	if os.stalled && len(os.ends) <= c.s.cfg.StreamMaxUnsent {
		os.stalled = false
	}
	if os.ending || c.blocked(st) {
		return
	}
	gen := st.gen
	for os.backlog != nil && !os.ending && !c.blocked(st) {
		n := c.consume(st, (*os.backlog)[os.backOff:])
		if st.gen != gen {
			return // ended and forgotten
		}
		os.backOff += n
		st.unacked += int64(n)
		if os.backOff == len(*os.backlog) {
			os.putBacklog()
		}
	}
	if os.ending && os.backlog != nil {
		st.unacked += int64(len(*os.backlog) - os.backOff)
		os.putBacklog()
	}
	if os.eos && os.backlog == nil {
		os.eos = false
		c.streamEnd(st)
		return
	}
	c.streamWindowLocked(st)
}

// streamEnd acts on the client's END_STREAM, once the stream's data before it was handled:
// the stream ends, OK, after the answers it owes; a message cut short ends it as grpc-go's
// receive does.
func (c *h2Conn) streamEnd(st *h2Stream) error {
	st.remoteDone = true
	if st.contentLen >= 0 && st.dataLen != st.contentLen {
		return errMalformed // §8.1.1
	}
	switch {
	case st.os.ending:
		// Its trailers follow what it owes; then it is forgotten, the client being done.
	case st.os.backlog != nil:
		st.os.eos = true
	case st.preN > 0:
		c.endStreamLocked(st, errUnexpectedEOF)
	default:
		c.endStreamLocked(st, nil)
	}
	return nil
}

// endStreamLocked decides the stream's end with err (nil: OK): nothing more is read, an
// unfinished message is dropped unanswered, and the trailers follow the answers it owes.
func (c *h2Conn) endStreamLocked(st *h2Stream, err error) {
	os := &st.os
	if os.ending || st.answered {
		return
	}
	os.ending, os.endErr = true, err
	os.eos = false
	st.releaseMsg()
	if os.backlog != nil {
		st.unacked += int64(len(*os.backlog) - os.backOff)
		os.putBacklog()
	}
	if os.ageTimer != nil {
		os.ageTimer.Stop()
	}
	c.trailersLocked(st)
}

// trailersLocked sends the trailers of a stream whose end is decided, once no answer is owed
// to a waiter. A client that did not close its side is then reset with NO_ERROR, as grpc-go
// resets it.
func (c *h2Conn) trailersLocked(st *h2Stream) {
	os := &st.os
	if !os.ending || os.waiters > 0 || st.localDone {
		return
	}
	st.resetEnd = true
	if !os.hdrSent {
		c.answerError(st, os.endErr, http.StatusOK) // trailers-only, grpc-status 0 for OK
		return
	}
	if os.endErr == nil {
		st.trailers = h2TrailersOK
	} else {
		st.trailers = trailersFrame(os.endErr)
	}
	st.isPark = true
	c.sendStreamLocked(st)
}
