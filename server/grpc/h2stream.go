package grpcserver

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/pool"
)

// h2Stream is one call of an h2Conn: a unary v1 Export or OTEP UnaryExporter call from its
// HEADERS to its answer, or an OTEP StreamExporter call (h2otep.go) from its HEADERS to its
// trailers. It belongs to its connection's mu (h2Conn invariant 2) and is recycled through
// the connection's free list.
type h2Stream struct {
	id   uint32
	gen  uint32 // bumped when the stream is recycled: a late waiter finds it changed
	sig  fastpath.Signal
	otep bool   // an OTEP call (otlpgate.otep.v1.UnaryExporter or StreamExporter); else a v1 Export
	enc  string // the grpc-encoding of the message, "" for none
	from pipeline.Origin

	remoteDone bool   // the client's END_STREAM (or a reset) came
	localDone  bool   // the answer's END_STREAM (or a reset) went out
	answered   bool   // the answer was decided: later DATA is counted and dropped
	waiting    bool   // an -ack=upstream waiter owns the answer
	roomWait   bool   // a waiter waits for the intake limiter's room for the message (waitRoom)
	stopWait   func() // ends that wait early: the stream was reset or answered

	recvWin, unacked int64 // the stream's receive window left, and what was taken in and not given back
	sendWin          int64 // the client's window for the answer's DATA

	pre        [5]byte // the gRPC message prefix as it arrives
	preN       int
	msgLen     int // the message's length from its prefix; -1 before
	compressed bool
	msg        *[]byte // the message as received (pooled)
	plain      *[]byte // its decompressed form (pooled)
	hold       admission.Hold
	dataLen    int64         // DATA bytes received, for content-length
	contentLen int64         // the content-length header, -1 when absent
	timeout    time.Duration // the call's grpc-timeout
	timeoutSet bool          // a valid grpc-timeout came, perhaps 0
	// deadline is when the call's grpc-timeout passes (zero: it sent none); its timer is made
	// once per h2Stream, re-armed per call (h2deadline.go) and stopped when the stream is
	// dropped.
	deadline      time.Time
	deadlineTimer *time.Timer
	deadlineArmed bool

	parked   []byte           // the answer's DATA payload
	sent     int              // the part of parked sent
	trailers *h2.HeadersFrame // what follows parked; nil: its last DATA frame ends the stream
	isPark   bool             // parked is not all sent: it waits for the client's window
	resetEnd bool             // reset the stream (NO_ERROR) once answered, if the client is not done

	os otepStream // an OTEP StreamExporter call's state (h2otep.go); os.on for such a call
}

// newStream takes a stream from the free list (or makes one) for id, registered as open.
func (c *h2Conn) newStream(id uint32) *h2Stream {
	var st *h2Stream
	if n := len(c.mu.free); n > 0 {
		st = c.mu.free[n-1]
		c.mu.free = c.mu.free[:n-1]
	} else {
		st = &h2Stream{}
	}
	gen, parked, os, dt := st.gen, st.parked[:0], st.os.recycled(), st.deadlineTimer
	*st = h2Stream{id: id, gen: gen, parked: parked, msgLen: -1, contentLen: -1,
		recvWin: int64(c.s.cfg.InitialWindowSize), sendWin: c.mu.initWin, os: os, deadlineTimer: dt}
	c.mu.streams = append(c.mu.streams, st)
	return st
}

// dropStream forgets st and recycles it, giving back what it holds.
func (c *h2Conn) dropStream(st *h2Stream) {
	for i, o := range c.mu.streams {
		if o == st {
			last := len(c.mu.streams) - 1
			c.mu.streams[i] = c.mu.streams[last]
			c.mu.streams[last] = nil
			c.mu.streams = c.mu.streams[:last]
			break
		}
	}
	st.endWait()
	st.release()
	if st.deadlineArmed {
		st.deadlineTimer.Stop()
		st.deadlineArmed = false
	}
	st.deadline = time.Time{}
	st.gen++
	st.id = 0
	st.from = pipeline.Origin{}
	if len(c.mu.free) < maxFreeStreams {
		c.mu.free = append(c.mu.free, st)
	}
}

// endWait ends a wait for the intake limiter's room (waitRoom) the stream no longer needs.
func (st *h2Stream) endWait() {
	if st.stopWait != nil {
		st.stopWait()
		st.stopWait = nil
	}
}

// maxFreeStreams bounds the streams a connection keeps for reuse.
const maxFreeStreams = 64

// release gives back the stream's buffers and reservation.
func (st *h2Stream) release() {
	st.releaseMsg()
	st.os.release()
}

// releaseMsg gives back the message's buffers and reservation, and readies the stream for the
// next message's prefix.
func (st *h2Stream) releaseMsg() {
	st.msgLen, st.preN = -1, 0
	st.hold.Release()
	if st.msg != nil {
		pool.PutBytes(st.msg)
		st.msg = nil
	}
	if st.plain != nil {
		pool.PutBytes(st.plain)
		st.plain = nil
	}
}

// The v1 services' paths, and the errors of a call this transport does not serve, in
// grpc-go's words where it has them.
var (
	h2Paths = [fastpath.NumSignals]string{
		fastpath.Traces:  "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
		fastpath.Metrics: "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
		fastpath.Logs:    "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
	}
	h2OTEPPaths = [fastpath.NumSignals]string{
		fastpath.Traces:  "/otlpgate.otep.v1.UnaryExporter/ExportTraces",
		fastpath.Metrics: "/otlpgate.otep.v1.UnaryExporter/ExportMetrics",
		fastpath.Logs:    "/otlpgate.otep.v1.UnaryExporter/ExportLogs",
	}
	h2StreamPaths = [fastpath.NumSignals]string{
		fastpath.Traces:  "/otlpgate.otep.v1.StreamExporter/ExportTraces",
		fastpath.Metrics: "/otlpgate.otep.v1.StreamExporter/ExportMetrics",
		fastpath.Logs:    "/otlpgate.otep.v1.StreamExporter/ExportLogs",
	}
	errUnaryExtra   = status.Error(codes.Internal, "grpc: client streaming protocol violation: get <nil>, want <EOF>")
	errNoMessage    = status.Error(codes.Internal, "grpc: the call ended before its request message did")
	errCompressFlag = status.Error(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
	errNoAuthority  = status.Error(codes.Internal, "no host or :authority header present")
	// errDeadlineExceeded ends a call whose grpc-timeout passed, or refuses one whose
	// deadline passed before it began, in grpc-go's words.
	errDeadlineExceeded = status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())
	// errNoRoom is checkPrefix's refusal of a message the intake limiter has no room for.
	errNoRoom = errors.New("grpc: no room in the intake limiter for the message")
	// errWaitRoom is checkPrefix's answer for a unary call's message the intake limiter has no
	// room for yet: the call waits for it (waitRoom).
	errWaitRoom = errors.New("grpc: waiting for room in the intake limiter for the message")
)

// open checks a new call's headers, authorizes it and reads its tenant; an error it returns
// resets the stream; a refusal of the call is answered here.
func (st *h2Stream) open(c *h2Conn, fields []h2.Field) error {
	// Values stay views of the decoder's buffer: compared in place, never converted to
	// strings that would escape (a conversion only for the words of an error).
	var method, path, ctype, enc, badTimeout []byte
	var nMethod, nScheme, nPath, nAuthority, nStatus, nHost int
	connSpecific := false
	timeoutAt := 0 // the place of the last malformed grpc-timeout among fields
	for i, f := range fields {
		switch f.Name {
		case ":method":
			nMethod++
			method = f.Value
		case ":scheme":
			nScheme++
		case ":path":
			nPath++
			path = f.Value
		case ":authority":
			nAuthority++
		case ":status":
			nStatus++
		case "host":
			nHost++
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			connSpecific = true // §8.2.2
		case "te":
			connSpecific = connSpecific || string(f.Value) != "trailers"
		case "content-type":
			ctype = f.Value
		case "grpc-encoding":
			enc = f.Value
		case "content-length":
			n, ok := parseDecimal(f.Value)
			if !ok {
				return errMalformed
			}
			st.contentLen = n
		case "grpc-timeout":
			st.timeout, st.timeoutSet = parseGRPCTimeout(f.Value)
			if !st.timeoutSet {
				badTimeout, timeoutAt = f.Value, i
			}
		}
	}
	// The checks and their order are grpc-go's: x/net's framer refuses a pseudo-field sent
	// twice, or a response's with a request's; its transport refuses then (gRPC's A41) a
	// request with several host fields, one with a connection field, one not gRPC, malformed
	// metadata, one with no authority, one whose method is not POST. Where grpc-go lets
	// through what RFC 9113 calls malformed (§8.3.1: a missing or empty pseudo-field; §8.2.2:
	// te other than trailers, the connection-specific fields but connection), this transport
	// resets the stream as the RFC asks, in the place of grpc-go's refusal of a connection
	// field: no gRPC client sends such a request, and h2spec holds the transport to the RFC.
	if nMethod != 1 || nScheme != 1 || nPath != 1 || len(path) == 0 || nAuthority > 1 || nStatus > 0 {
		return errMalformed
	}
	if nHost > 1 {
		st.resetEnd = true
		c.answerError(st, status.Errorf(codes.Internal, "num values of :authority: %v, num values of host: %v, both must only have 1 value as per HTTP/2 spec", nAuthority, nHost), http.StatusBadRequest)
		return nil
	}
	if connSpecific {
		return errMalformed
	}
	if !isGRPCContentType(ctype) {
		// Checked before the method, as grpc-go does; answered with a body besides the
		// status, for whoever sent it (curl, a browser, h2spec's GET).
		c.answerNotGRPC(st, ctype)
		return nil
	}
	// A malformed grpc-timeout, or binary metadata that is not base64 (the decoder checks
	// every -bin field, h2.Config.Binary), refuses the call as grpc-go's transport refuses
	// it, before the method is looked at: 400 and INTERNAL in the words of whichever came
	// last, and a reset of the rest of the call.
	var headerErr error
	if badTimeout != nil {
		headerErr = malformedTimeout(badTimeout)
	}
	if b, ok := c.dec.BadBinary(); ok && (badTimeout == nil || b.Kept > timeoutAt) {
		headerErr = malformedBinary(b.Name, b.Value)
	}
	if headerErr != nil {
		st.resetEnd = true
		c.answerError(st, headerErr, http.StatusBadRequest)
		return nil
	}
	if nAuthority+nHost == 0 {
		st.resetEnd = true
		c.answerError(st, errNoAuthority, http.StatusBadRequest)
		return nil
	}
	if string(method) != http.MethodPost {
		st.resetEnd = true
		c.answerError(st, status.Errorf(codes.Internal, "Received a HEADERS frame with :method %q which should be POST", method), http.StatusMethodNotAllowed)
		return nil
	}
	if st.timeoutSet && st.timeout <= 0 {
		// A deadline that passed before the call began ("0S"): refused before its method is
		// looked up, as grpc-go's transport refuses it.
		st.resetEnd = true
		c.answerError(st, errDeadlineExceeded, http.StatusOK)
		return nil
	}
	sig, ok := fastpath.Signal(0), false
	for i, p := range h2Paths {
		if p == string(path) {
			sig, ok = fastpath.Signal(i), true
			break
		}
	}
	for i, p := range h2OTEPPaths {
		if !ok && p == string(path) {
			sig, ok, st.otep = fastpath.Signal(i), true, true
			break
		}
	}
	for i, p := range h2StreamPaths {
		if !ok && p == string(path) {
			sig, ok, st.otep, st.os.on = fastpath.Signal(i), true, true, true
			break
		}
	}
	if !ok {
		c.answerError(st, unimplemented(string(path)), http.StatusOK)
		return nil
	}
	st.sig = sig
	switch string(enc) {
	case "", "identity":
		st.enc = ""
	case codec.Gzip:
		st.enc = codec.Gzip
	case codec.Zstd:
		st.enc = codec.Zstd
	default:
		c.answerError(st, status.Errorf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", enc), http.StatusOK)
		return nil
	}
	c.meta.fields = fields
	err := c.s.authorizeMeta(&c.meta)
	var from pipeline.Origin
	if err == nil {
		from, err = c.s.originMeta(&c.meta, c.peer)
	}
	c.meta.fields = nil
	if err != nil {
		c.answerError(st, err, http.StatusOK)
		return nil
	}
	st.from = from
	if st.os.on {
		c.openStream(st, fields)
	} else {
		c.setDeadline(st)
	}
	return nil
}

// malformedBinary is the refusal of a call whose binary metadata field name carries value,
// which is not base64, in the words of grpc-go's transport.
func malformedBinary(name, value []byte) error {
	v := string(value)
	var err error
	if len(v)%4 == 0 { // grpc-go's decoding: padded when the length allows it
		_, err = base64.StdEncoding.DecodeString(v)
	} else {
		_, err = base64.RawStdEncoding.DecodeString(v)
	}
	return status.Errorf(codes.Internal, "malformed binary metadata %q in header %q: %v", v, name, err)
}

// parseDecimal reads a content-length value.
func parseDecimal(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// unimplemented is grpc-go's answer to a method it does not serve.
func unimplemented(path string) error {
	p, found := strings.CutPrefix(path, "/")
	i := strings.LastIndexByte(p, '/')
	if !found || i < 0 {
		return status.Errorf(codes.Unimplemented, "malformed method name: %q", path)
	}
	svc, m := p[:i], p[i+1:]
	for _, ks := range [...]*[fastpath.NumSignals]string{&h2Paths, &h2OTEPPaths, &h2StreamPaths} {
		for _, k := range ks {
			if strings.HasPrefix(k[1:], svc+"/") {
				return status.Errorf(codes.Unimplemented, "unknown method %v for service %v", m, svc)
			}
		}
	}
	return status.Errorf(codes.Unimplemented, "unknown service %v", svc)
}

// isGRPCContentType reports whether ct is application/grpc, with a subtype or parameters.
func isGRPCContentType(ct []byte) bool {
	const base = "application/grpc"
	if len(ct) < len(base) || !strings.EqualFold(string(ct[:len(base)]), base) {
		return false
	}
	return len(ct) == len(base) || ct[len(base)] == '+' || ct[len(base)] == ';'
}

// data takes in a DATA frame's bytes: the message prefix, then the message.
func (st *h2Stream) data(c *h2Conn, b []byte) error {
	st.dataLen += int64(len(b))
	if st.contentLen >= 0 && st.dataLen > st.contentLen {
		return errMalformed // §8.1.1
	}
	for len(b) > 0 && !st.answered {
		if st.msgLen < 0 {
			n := copy(st.pre[st.preN:], b)
			st.preN += n
			b = b[n:]
			if st.preN < len(st.pre) {
				return nil
			}
			st.prefix(c)
			continue
		}
		if st.msg == nil || len(*st.msg) == st.msgLen {
			c.answerError(st, errUnaryExtra, http.StatusOK)
			return nil
		}
		n := min(len(b), st.msgLen-len(*st.msg))
		*st.msg = append(*st.msg, b[:n]...)
		b = b[n:]
	}
	return nil
}

// prefix handles a complete 5-byte message prefix of a unary call: the message's bounds, and
// its reservation from the intake limiter.
func (st *h2Stream) prefix(c *h2Conn) {
	if unwanted, err := st.checkPrefix(c); err != nil {
		if err == errWaitRoom {
			c.waitRoom(st)
			return
		}
		if err == errNoRoom {
			err = c.s.busy()
		}
		st.resetEnd = unwanted // the rest of the message is not wanted
		c.answerError(st, err, http.StatusOK)
	}
}

// checkPrefix checks a complete message prefix and reserves the message's bytes from the
// intake limiter, unary call and stream message alike; on success the message's buffer is
// ready. An error refuses the message; unwanted says its rest is not read (too large, or no
// room for it: errNoRoom, with msgLen set), as grpc-go resets such a stream.
func (st *h2Stream) checkPrefix(c *h2Conn) (unwanted bool, err error) {
	s := c.s
	n := binary.BigEndian.Uint32(st.pre[1:])
	switch {
	case st.pre[0] > 1:
		return false, status.Errorf(codes.Internal, "grpc: received unexpected payload format %d", st.pre[0])
	case int64(n) > int64(s.cfg.MaxRecvMsgSize):
		return true, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, s.cfg.MaxRecvMsgSize)
	case st.pre[0] == 1 && st.enc == "":
		return false, errCompressFlag
	}
	st.compressed = st.pre[0] == 1
	// The reservation is the message's own length, known now, not the largest, taken without
	// waiting when there is room (the reader serves every stream of the connection). When
	// there is none, a unary call waits for it on a goroutine of its own up to -intake.wait,
	// as grpc-go's path waits, and is refused then (waitRoom); an OTEP stream's message, and
	// any message without -intake.wait, is refused at once.
	if !c.tryTake(&st.hold, int64(n)) {
		if !st.os.on && c.mayWait() {
			st.msgLen = int(n)
			return false, errWaitRoom
		}
		if !c.take(&st.hold, int64(n), closedCh) {
			st.msgLen = int(n) // the length of what is not read
			return true, errNoRoom
		}
	}
	st.msgLen = int(n)
	st.msg = pool.GetBytes(int(n))
	return false, nil
}

// closedCh is closed: a reservation taken with it does not wait.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// take reserves n bytes of the intake limiter for a message of the connection, waiting up to
// -intake.wait or until done is closed (closedCh: not at all); a refusal is counted.
func (c *h2Conn) take(h *admission.Hold, n int64, done <-chan struct{}) bool {
	if c.acct != nil {
		return c.s.adm.TakeFrom(h, c.acct, n, done)
	}
	return c.s.adm.Take(h, admission.IntakeGRPC, n, done)
}

// tryTake is take when there is room now: no wait, and no refusal counted.
func (c *h2Conn) tryTake(h *admission.Hold, n int64) bool {
	if c.acct != nil {
		return c.s.adm.TryTakeFrom(h, c.acct, n)
	}
	return c.s.adm.TryTake(h, admission.IntakeGRPC, n)
}

// mayWait reports whether a message may wait for the intake limiter's room (-intake.wait).
func (c *h2Conn) mayWait() bool {
	lim := c.s.adm.Limiter()
	return lim != nil && lim.Wait() > 0
}

// waitRoom waits, on a goroutine of its own, up to -intake.wait (or the call's deadline, or
// the connection's end) for the intake limiter's room for a unary call's message whose prefix
// found none, as grpc-go's path waits before it reads a call's message, and then lets the
// message in, or answers the call RESOURCE_EXHAUSTED with RetryInfo and resets the rest of it
// as the immediate refusal does. While it waits, the message's bytes that arrive are kept,
// and the stream's window is not given back: the client is held back by flow control, and the
// call holds at most the stream's window (-grpc.http2.stream-window) unreserved, as on
// grpc-go's path. Only the busy path comes here: the goroutine and its buffer allocate.
func (c *h2Conn) waitRoom(st *h2Stream) {
	st.roomWait = true
	st.msg = pool.GetBytes(min(st.msgLen, int(c.s.cfg.InitialWindowSize)))
	gen, n := st.gen, int64(st.msgLen)
	// The call's deadline ends the wait too: its timer answers the call (deadlinePassed),
	// which calls stopWait.
	ctx, cancel := context.WithCancel(c.ctx)
	st.stopWait = cancel
	c.async.Add(1)
	go func() {
		defer c.async.Done()
		defer cancel()
		var h admission.Hold
		ok := c.take(&h, n, ctx.Done())
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.mu.closed || c.ctx.Err() != nil || st.gen != gen || !st.roomWait || st.answered {
			if st.gen == gen {
				st.roomWait, st.stopWait = false, nil
			}
			h.Release() // reset by the client, answered meanwhile, or the connection ended
			return
		}
		st.roomWait, st.stopWait = false, nil
		switch {
		case !ok:
			st.resetEnd = true // the rest of the message is not wanted
			c.answerError(st, c.s.busy(), http.StatusOK)
		case st.remoteDone:
			st.hold = h
			if len(*st.msg) < st.msgLen {
				c.answerError(st, errNoMessage, http.StatusOK)
				break
			}
			c.admit(st)
		default:
			st.hold = h
			if cap(*st.msg) < st.msgLen {
				b := pool.GetBytes(st.msgLen)
				*b = append(*b, *st.msg...)
				pool.PutBytes(st.msg)
				st.msg = b
			}
			// The window held back while the call waited.
			if st.unacked > 0 {
				*c.mu.out = appendWindowUpdate(*c.mu.out, st.id, uint32(st.unacked))
				st.recvWin += st.unacked
				st.unacked = 0
			}
		}
		c.flushLocked()
		if c.mu.final && len(c.mu.streams) == 0 {
			c.raw.Close()
		}
	}()
}

// endRemote handles the client's END_STREAM: a whole request is admitted and answered.
func (c *h2Conn) endRemote(st *h2Stream) error {
	st.remoteDone = true
	if st.os.on && !st.answered {
		return c.streamEnd(st)
	}
	if st.contentLen >= 0 && st.dataLen != st.contentLen {
		return errMalformed // §8.1.1
	}
	if st.answered {
		if st.localDone {
			c.dropStream(st)
		}
		return nil
	}
	if st.roomWait {
		return nil // the waiter admits the request once it has room (waitRoom)
	}
	if st.msg == nil || len(*st.msg) < st.msgLen {
		c.answerError(st, errNoMessage, http.StatusOK)
		return nil
	}
	c.admit(st)
	return nil
}

// admit admits the stream's request and answers it, on the reader; with -ack=upstream a
// waiter answers once the upstream did.
func (c *h2Conn) admit(st *h2Stream) {
	s := c.s
	st.answered = true
	r := pipeline.Request{Signal: st.sig, Origin: st.from, Body: *st.msg}
	if st.compressed {
		plain, err := c.decompress(st)
		if err != nil {
			st.answered = false
			c.answerError(st, err, http.StatusOK)
			return
		}
		r.Body = plain
		if st.enc == s.cfg.PassThrough {
			r.Wire, r.Encoding = *st.msg, wireEncoding(st.enc)
		}
	} else {
		r.Own = st.msg
	}
	if st.otep {
		v := s.admitOTEPUnary(st.from, st.sig, r.Body)
		st.release()
		if v.reason == admission.Accepted && v.b != nil {
			c.awaitOTEP(st, v)
			return
		}
		c.answerOTEP(st, v)
		return
	}
	v := s.admitV1(r)
	st.release()
	if v.reason == admission.Accepted && v.b != nil {
		c.awaitV1(st, v)
		return
	}
	c.answerVerdict(st, v)
}

// awaitV1 and awaitOTEP hand an admitted request's answer to a waiter (await). They are
// functions of their own so that the closures, and the verdicts they capture, are made only
// on this path: captured in admit, a verdict would move to the heap on every call.
func (c *h2Conn) awaitV1(st *h2Stream, v v1Verdict) {
	c.await(st, v.b, v.items, kindV1, func(reason admission.Reason) {
		v.reason = reason
		c.answerVerdict(st, v)
	})
}

func (c *h2Conn) awaitOTEP(st *h2Stream, v otepVerdict) {
	c.await(st, v.b, v.items, kindOTEPUnary, func(reason admission.Reason) {
		v.reason = reason
		c.answerOTEP(st, v)
	})
}

// answerOTEP answers an OTEP unary call as admission decided: its ExportResponse, or the
// status that ends it under sustained overload.
func (c *h2Conn) answerOTEP(st *h2Stream, v otepVerdict) {
	resp, err := c.s.otepUnaryAnswer(v)
	if err != nil {
		st.answered = false
		c.answerError(st, err, http.StatusOK)
		return
	}
	st.answered = true
	*c.mu.out = h2RespHeaders.Append(*c.mu.out, st.id)
	n := resp.SizeVT()
	p := append(st.parked[:0], 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	p = append(p, make([]byte, n)...)
	if _, err := resp.MarshalToSizedBufferVT(p[5:]); err != nil {
		panic("BUG: grpc: an OTEP answer does not marshal: " + err.Error())
	}
	c.sendLocked(st, p, h2TrailersOK)
}

func wireEncoding(enc string) pipeline.Encoding {
	if enc == codec.Gzip {
		return pipeline.EncodingGzip
	}
	return pipeline.EncodingZstd
}

// await waits, on a goroutine of its own, for the upstream's answer of an admitted request
// (-ack=upstream) and answers the call then.
func (c *h2Conn) await(st *h2Stream, b *pipeline.Batch, items int, k kind, answer func(admission.Reason)) {
	st.waiting = true
	gen, sig := st.gen, st.sig
	ctx, cancel := c.ctx, func() {}
	if st.timeout > 0 {
		// The call's deadline ends the wait: its timer answers the call (deadlinePassed),
		// which calls stopWait; the request is then counted refused (canceled).
		ctx, cancel = context.WithCancel(c.ctx)
		st.stopWait = cancel
	}
	c.async.Add(1)
	go func() {
		defer c.async.Done()
		defer cancel()
		reason := ctr.await(ctx, k, sig, b, items)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.mu.closed || st.gen != gen {
			return // reset by the client, answered at its deadline, or the connection ended
		}
		st.waiting, st.stopWait = false, nil
		answer(reason)
		c.flushLocked()
		if c.mu.final && len(c.mu.streams) == 0 {
			c.raw.Close()
		}
	}()
}

// decompress inflates the stream's message with the registered decompressor of its encoding
// (the one grpc-go's path uses, drawing on the inflate budget), at most
// -grpc.max-recv-msg-size bytes.
func (c *h2Conn) decompress(st *h2Stream) ([]byte, error) {
	limit := c.s.cfg.MaxRecvMsgSize
	comp := encoding.GetCompressor(st.enc)
	if comp == nil {
		return nil, status.Errorf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", st.enc)
	}
	c.src.Reset(*st.msg)
	defer c.src.Reset(nil)
	r, err := comp.Decompress(&c.src)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the received message: %v", err)
	}
	if cl, ok := r.(io.Closer); ok {
		defer cl.Close()
	}
	st.plain = pool.GetBytes(min(max(len(*st.msg)*8, 4<<10), limit+1))
	out := (*st.plain)[:0]
	for {
		if len(out) == cap(out) {
			if len(out) > limit {
				break
			}
			nb := pool.GetBytes(min(2*cap(out), limit+1))
			*nb = append((*nb)[:0], out...)
			pool.PutBytes(st.plain)
			st.plain, out = nb, *nb
		}
		n, err := r.Read(out[len(out):min(cap(out), limit+1)])
		out = out[:len(out)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, codec.ErrInflateBudget) || codec.IsInflateBudget(err) {
				return nil, c.s.busy()
			}
			return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the received message: %v", err)
		}
		if len(out) > limit {
			break
		}
	}
	*st.plain = out
	if len(out) > limit {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: message after decompression larger than max (%d vs. %d)", len(out), limit)
	}
	return out, nil
}

// answerVerdict answers the call as admission decided.
func (c *h2Conn) answerVerdict(st *h2Stream, v v1Verdict) {
	if v.reason != admission.Accepted {
		st.answered = false
		err := errDeadlineExceeded // Timeout: the call's deadline ended its wait for the upstream
		if v.reason != admission.Timeout {
			err = c.s.v1Error(c.ctx, v.reason, v.wait)
		}
		c.answerError(st, err, http.StatusOK)
		return
	}
	st.answered = true
	*c.mu.out = h2RespHeaders.Append(*c.mu.out, st.id)
	p := append(st.parked[:0], 0, 0, 0, 0, 0)
	if v.msg != "" {
		if m, ok := v1Response(st.sig, v.rejected, v.msg).(interface{ MarshalVT() ([]byte, error) }); ok {
			if b, err := m.MarshalVT(); err == nil {
				binary.BigEndian.PutUint32(p[1:], uint32(len(b)))
				p = append(p, b...)
			}
		}
	}
	c.sendLocked(st, p, h2TrailersOK)
}

// answerNotGRPC answers a request that is not gRPC (its content-type) with 415, grpc-go's
// status fields, and the reason as a text body.
func (c *h2Conn) answerNotGRPC(st *h2Stream, ctype []byte) {
	st.answered = true
	msg := fmt.Sprintf("invalid gRPC request content-type %q", ctype)
	f := mustHeadersFrame(false, h2.HeaderField{Name: ":status", Value: "415"},
		h2.HeaderField{Name: "content-type", Value: "text/plain; charset=utf-8"},
		h2.HeaderField{Name: "grpc-status", Value: "3"},
		h2.HeaderField{Name: "grpc-message", Value: encodeGRPCMessage(msg)})
	*c.mu.out = f.Append(*c.mu.out, st.id)
	c.sendLocked(st, append(append(st.parked[:0], msg...), '\n'), nil)
}

// sendLocked sends payload as the answer's DATA, then trailers (nil: the last DATA frame ends
// the stream), as far as the client's windows allow; the rest waits for its WINDOW_UPDATE or
// SETTINGS (flushParkedLocked). payload must be st.parked's storage.
func (c *h2Conn) sendLocked(st *h2Stream, payload []byte, trailers *h2.HeadersFrame) {
	c.strikes = 0 // an answer forgives early PINGs, as grpc-go's data does
	st.parked, st.sent, st.trailers, st.isPark = payload, 0, trailers, true
	c.sendParkedLocked(st)
}

// sendParkedLocked sends what the windows allow of the stream's answer, and reports whether
// all of it went out (the stream is then closed on its side).
func (c *h2Conn) sendParkedLocked(st *h2Stream) bool {
	out := *c.mu.out
	for st.sent < len(st.parked) {
		n := min(int64(len(st.parked)-st.sent), c.mu.sendConn, st.sendWin, int64(c.mu.peerMaxFrame))
		if n <= 0 {
			*c.mu.out = out
			return false
		}
		end := st.sent + int(n)
		out = appendDataFrame(out, st.id, end == len(st.parked) && st.trailers == nil, st.parked[st.sent:end])
		c.mu.sendConn -= n
		st.sendWin -= n
		st.sent = end
	}
	if st.trailers != nil {
		out = st.trailers.Append(out, st.id)
	}
	*c.mu.out = out
	st.isPark = false
	st.localDone = true
	c.finishLocked(st)
	return true
}

// flushParkedLocked sends the parked answers the windows now allow.
// An OTEP stream sends its answers the same way, and reads on (resumeLocked) once fewer of
// them wait.
func (c *h2Conn) flushParkedLocked() {
	for i := 0; i < len(c.mu.streams); {
		st := c.mu.streams[i]
		switch {
		case st.os.on:
			if st.isPark {
				c.sendStreamLocked(st)
			}
			c.resumeLocked(st)
		case st.isPark:
			c.sendParkedLocked(st)
		}
		if i < len(c.mu.streams) && c.mu.streams[i] != st {
			continue // dropped: another took its place at i
		}
		i++
	}
}

// answerError answers the call with err as trailers-only, with :status httpStatus.
func (c *h2Conn) answerError(st *h2Stream, err error, httpStatus int) {
	if st.answered && st.localDone {
		return
	}
	st.answered, st.localDone = true, true
	st.endWait()
	c.strikes = 0
	*c.mu.out = trailersOnlyFrame(err, httpStatus).Append(*c.mu.out, st.id)
	c.finishLocked(st)
}

// finishLocked closes a stream whose answer went out: forgotten if the client is done too;
// else reset with NO_ERROR when the rest of its message is not wanted (resetEnd, as grpc-go
// resets a stream whose message is too large), or left half-closed (local) until the client
// ends it, its later DATA counted and dropped, its trailers still checked (RFC 9113 §8.1).
func (c *h2Conn) finishLocked(st *h2Stream) {
	switch {
	case st.remoteDone:
		c.dropStream(st)
	case st.resetEnd:
		c.resetLocked(st.id, http2.ErrCodeNo)
	}
}
