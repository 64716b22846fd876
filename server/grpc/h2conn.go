package grpcserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"golang.org/x/net/http2"

	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/pool"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// h2Conn is one connection of otlpgate's own transport (-grpc.transport=otlpgate), served by
// one goroutine (serve): it reads large chunks into a pooled buffer, parses the frames in
// place, decodes each header block with its h2.Decoder, collects a call's DATA into the
// call's message buffer, admits a unary call's request on the same goroutine once it is
// whole, and writes the answers of one read in one write.
//
// Invariants:
//
//  1. Only serve reads the connection, parses, decodes and changes the receive side (the
//     header block being assembled, receive windows, lastID), but for a unary call that
//     waited for the intake limiter's room: its waiter (waitRoom) gives back the stream's
//     window held back meanwhile, under mu, as serve holds mu while it handles a read.
//  2. mu guards the write side and the streams: out (frames not yet written), the send
//     windows, the stream table and the shutdown state. serve holds it while it handles a
//     read, not while it waits in Read; an -ack=upstream call's waiter takes it to answer.
//  3. A stream is in streams from its HEADERS until both ends closed it (the client's
//     END_STREAM or RST_STREAM, and the answer's END_STREAM or the server's RST_STREAM);
//     then it returns to free, with its buffers given back.
type h2Conn struct {
	s    *Server
	raw  net.Conn // the accepted connection: closing it ends everything; safe from any goroutine
	nc   net.Conn // what serve reads and writes: raw, or the TLS connection over it (set by serve before its first write)
	peer netip.Addr
	acct *admission.Account // the connection's intake limiter account; nil without a limiter
	dec  *h2.Decoder
	meta fieldMeta

	ageTimer, graceTimer *time.Timer // -grpc.max-connection-age and its grace; nil when off
	// Server keepalive (-grpc.keepalive.time, -grpc.keepalive.timeout): lastRead is when serve
	// last read bytes (unix ns); kaTimer's callback (keepalive) owns kaSentAt.
	lastRead atomic.Int64
	kaTimer  *time.Timer
	kaSentAt int64

	ctx    context.Context // ends with the connection: -ack=upstream waiters stop
	cancel context.CancelFunc
	async  sync.WaitGroup // -ack=upstream waiters

	// Receive side (serve only).
	rbuf     *[]byte
	maxFrame uint32 // the SETTINGS_MAX_FRAME_SIZE advertised
	settings bool   // the client's first SETTINGS arrived
	lastID   uint32 // the highest stream id the client opened
	recvConn int64  // the connection's receive window left
	unacked  int64  // connection window consumed and not yet given back
	unarmed  bool   // a call of this read has a deadline whose timer is not armed (armDeadlinesLocked)
	hdrID    uint32 // the stream whose header block is being assembled; 0: none
	hdrEnd   bool   // that HEADERS frame had END_STREAM
	hdrBuf   []byte // the block so far (bounded: maxBlock)
	hdrLast  int    // where the last fragment added to hdrBuf begins
	maxBlock int
	deadline int       // the read deadline set: deadlineHandshake, deadlineIdle or deadlineNone
	lastPing time.Time // the client's last PING (not an ACK)
	strikes  int       // PINGs sooner than -grpc.keepalive.min-time after the one before; under mu, as an answer resets it
	// resets has a bit for each of the last resetWindow stream ids below lastID that the
	// server reset: their late frames are ignored (RFC 9113 §5.4.2), however many were reset
	// (a burst of refused streams, of messages over the limit). A bit stands for one odd id
	// of the window; opening a stream clears the bits of the ids it passes.
	resets [resetWindow / 2 / 64]uint64
	src    bytes.Reader          // a compressed message, for its decompressor
	resp   otepv1.ExportResponse // an OTEP stream's answer being marshalled (under mu)

	mu struct {
		sync.Mutex
		out          *[]byte
		sendConn     int64  // the client's connection window for our DATA
		initWin      int64  // the client's SETTINGS_INITIAL_WINDOW_SIZE
		peerMaxFrame uint32 // the client's SETTINGS_MAX_FRAME_SIZE
		streams      []*h2Stream
		free         []*h2Stream
		started      bool   // the server's SETTINGS were written: frames may follow
		goingAway    bool   // phase one of the shutdown GOAWAY was sent (or, before started, is due)
		final        bool   // the last GOAWAY was sent: no stream above goawayID is served
		goawayID     uint32 // its last stream id
		closed       bool
	}
}

var (
	h2Errors = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_h2_errors_total",
		Help: "HTTP/2 errors of clients of -grpc.transport=otlpgate, by scope: connection (ended with a GOAWAY carrying the error code), stream (reset with RST_STREAM).",
	}, []string{"scope"})
	h2ConnErrors    = h2Errors.WithLabelValues("connection")
	h2StreamErrors  = h2Errors.WithLabelValues("stream")
	keepaliveCloses = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_grpc_keepalive_closed_connections_total",
		Help: "Connections of -grpc.transport=otlpgate closed because nothing came within -grpc.keepalive.timeout of the server's keepalive PING (sent after -grpc.keepalive.time without a byte).",
	})
)

// drainPing is the PING sent with the first GOAWAY of a shutdown; its ACK says the client saw
// the GOAWAY, and every stream it opened before is known (RFC 9113 §6.8).
var drainPing = [8]byte{'o', 't', 'l', 'p', 'g', 'a', 't', 'e'}

// errConnDone ends serve quietly: the connection closed or was closed.
var errConnDone = errors.New("grpc: connection done")

func (s *Server) newH2Conn(nc net.Conn) *h2Conn {
	c := &h2Conn{s: s, raw: nc, nc: nc}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		c.peer = a.AddrPort().Addr().Unmap()
	} else if a, ok := nc.RemoteAddr().(*connAddr); ok {
		if t, ok := a.Addr.(*net.TCPAddr); ok {
			c.peer = t.AddrPort().Addr().Unmap()
		}
		c.acct = a.c.acct
	}
	c.dec = h2.NewDecoder(s.h2.decCfg)
	c.maxFrame = s.h2.maxFrame
	c.maxBlock = s.h2.maxBlock
	c.recvConn = int64(s.cfg.InitialConnWindowSize)
	c.mu.sendConn = 65535
	c.mu.initWin = 65535
	c.mu.peerMaxFrame = h2.DefaultMaxFrameSize
	c.mu.out = pool.GetBytes(64 << 10)
	return c
}

// serve runs the connection until it ends. It runs on the connection's own goroutine.
func (c *h2Conn) serve() {
	defer c.close()
	if c.s.h2.tls != nil && !c.handshake() {
		return
	}
	c.rbuf = pool.GetBytes(c.s.h2.readSize)
	c.hdrBuf = make([]byte, 0, 4<<10)
	c.lastRead.Store(time.Now().UnixNano())
	if c.s.cfg.KeepaliveTime > 0 {
		c.kaTimer = time.AfterFunc(c.s.cfg.KeepaliveTime, c.keepalive)
	}
	// -grpc.max-connection-age: the shutdown's two GOAWAYs, so that the client moves to a new
	// connection, and after -grpc.max-connection-age-grace the connection closes, calls or not.
	if age := c.s.cfg.MaxConnectionAge; age > 0 {
		c.ageTimer = time.AfterFunc(age, c.goAway)
		if grace := c.s.cfg.MaxConnectionAgeGrace; grace > 0 {
			c.graceTimer = time.AfterFunc(age+grace, func() { c.raw.Close() })
		}
	}

	// The preface and the client's SETTINGS within -grpc.handshake-timeout.
	c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	c.mu.Lock()
	out := appendSettings(*c.mu.out, false,
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.s.cfg.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(c.s.cfg.InitialWindowSize)},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: c.maxFrame},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.s.h2.decCfg.MaxHeaderListSize},
	)
	if inc := int64(c.s.cfg.InitialConnWindowSize) - 65535; inc > 0 {
		out = appendWindowUpdate(out, 0, uint32(inc))
	}
	*c.mu.out = out
	c.mu.started = true
	if c.mu.goingAway {
		c.appendGoAwayLocked() // the shutdown began before the server's preface went out
	}
	err := c.flushLocked()
	c.mu.Unlock()
	if err != nil {
		return
	}
	buf := (*c.rbuf)[:cap(*c.rbuf)]
	start, end := 0, 0
	preface := true
	for {
		n, rerr := c.nc.Read(buf[end:])
		end += n
		if n > 0 && c.kaTimer != nil {
			c.lastRead.Store(time.Now().UnixNano())
		}
		if preface {
			if end < len(h2.ClientPreface) {
				if rerr != nil {
					return
				}
				if string(buf[:end]) != h2.ClientPreface[:end] {
					return // not HTTP/2 prior knowledge: nothing to answer in its protocol
				}
				continue
			}
			if string(buf[:len(h2.ClientPreface)]) != h2.ClientPreface {
				return
			}
			start, preface = len(h2.ClientPreface), false
		}
		c.mu.Lock()
		used, err := c.handle(buf[start:end])
		if err == nil {
			err = c.afterReadLocked()
		}
		if err != nil {
			c.failLocked(err)
			c.mu.Unlock()
			return
		}
		ferr := c.flushLocked()
		idle := len(c.mu.streams) == 0
		done := c.mu.final && idle
		c.mu.Unlock()
		if ferr != nil || done {
			return
		}
		c.idleDeadline(idle)
		start += used
		// The unread part of a frame moves to the front: at most one frame's bytes.
		if start == end {
			start, end = 0, 0
		} else if end == len(buf) || len(buf)-end < h2.FrameHeaderLen {
			end = copy(buf, buf[start:end])
			start = 0
		}
		if rerr != nil {
			if c.deadline == deadlineIdle {
				// -grpc.max-connection-idle passed without a call: say so, as grpc-go does.
				c.mu.Lock()
				*c.mu.out = appendGoAway(*c.mu.out, c.lastID, http2.ErrCodeNo, "max_idle")
				c.flushLocked()
				c.mu.Unlock()
			}
			return
		}
	}
}

// The read deadlines of a connection: -grpc.handshake-timeout until the client's preface and
// SETTINGS came, then -grpc.max-connection-idle while it has no call open (so that an idle
// client holds a connection slot no longer), none while it has.
const (
	deadlineHandshake = iota
	deadlineIdle
	deadlineNone
)

// idleDeadline sets the read deadline the connection's state asks for. serve only.
func (c *h2Conn) idleDeadline(idle bool) {
	if !c.settings {
		return // the handshake deadline holds
	}
	want := deadlineNone
	if idle && c.s.cfg.MaxConnectionIdle > 0 {
		want = deadlineIdle
	}
	if want == c.deadline {
		return
	}
	c.deadline = want
	if want == deadlineIdle {
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.MaxConnectionIdle))
		return
	}
	c.nc.SetReadDeadline(time.Time{})
}

// handshake runs the TLS handshake within -grpc.handshake-timeout and reports whether the
// client negotiated h2 (ALPN), as every gRPC client does. The frame watch of the accepted
// connection moves above TLS, where the frames are (as watchedCreds does for grpc-go).
func (c *h2Conn) handshake() bool {
	cc, watched := c.raw.(*conn)
	if watched {
		cc.plain = false // before the first byte: what crosses raw is not HTTP/2 in clear
	}
	t := tls.Server(c.raw, c.s.h2.tls)
	t.SetDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	if err := t.HandshakeContext(c.ctx); err != nil || t.ConnectionState().NegotiatedProtocol != "h2" {
		return false
	}
	t.SetDeadline(time.Time{})
	c.nc = t
	if watched {
		c.nc = &tlsConn{Conn: t, c: cc}
	}
	return true
}

// afterReadLocked gives back, once per read, the connection window the read consumed, and
// arms the deadline timers of the calls the read opened and left open.
func (c *h2Conn) afterReadLocked() error {
	c.armDeadlinesLocked()
	if c.unacked > 0 && (c.unacked >= int64(c.s.cfg.InitialConnWindowSize)/4 || c.recvConn < int64(c.maxFrame)*4) {
		*c.mu.out = appendWindowUpdate(*c.mu.out, 0, uint32(c.unacked))
		c.recvConn += c.unacked
		c.unacked = 0
	}
	return nil
}

// handle handles the whole frames at the start of b and returns how many bytes they span.
func (c *h2Conn) handle(b []byte) (int, error) {
	off := 0
	for {
		f, n, err := h2.NextFrame(b[off:], c.maxFrame)
		if err != nil {
			return off, err
		}
		if n == 0 {
			return off, nil
		}
		off += n
		if err := c.frame(f); err != nil {
			return off, err
		}
	}
}

// frame handles one frame. A connection error ends the connection; a stream error resets the
// frame's stream and is handled here.
func (c *h2Conn) frame(f h2.Frame) error {
	if !c.settings {
		// RFC 9113 §3.4: the preface's SETTINGS frame comes first.
		if f.Type != http2.FrameSettings || f.Has(http2.FlagSettingsAck) {
			return errPrefaceSettings
		}
	}
	if c.hdrID != 0 && (f.Type != http2.FrameContinuation || f.StreamID != c.hdrID) {
		return errHeaderBlockBroken // §6.10: nothing may come between a block's frames
	}
	var err error
	switch f.Type {
	case http2.FrameData:
		err = c.onData(f)
	case http2.FrameHeaders:
		err = c.onHeaders(f)
	case http2.FrameContinuation:
		err = c.onContinuation(f)
	case http2.FramePriority:
		_, err = f.Priority()
	case http2.FrameRSTStream:
		err = c.onRSTStream(f)
	case http2.FrameSettings:
		err = c.onSettings(f)
	case http2.FramePing:
		err = c.onPing(f)
	case http2.FrameGoAway:
		_, err = f.GoAway()
	case http2.FrameWindowUpdate:
		err = c.onWindowUpdate(f)
	case http2.FramePushPromise:
		err = f.PushPromise()
	default:
		// §4.1, §5.5: unknown types are ignored.
	}
	// A type assertion, not errors.As: every error here is one of h2's or this file's
	// values, and errors.As would move its target to the heap on every frame.
	if he, ok := err.(*h2.Error); ok && he.Stream {
		c.resetLocked(f.StreamID, he.Code)
		return nil
	}
	return err
}

var (
	errPrefaceSettings   = &h2.Error{Code: http2.ErrCodeProtocol, Reason: "the client preface is not followed by SETTINGS"}
	errHeaderBlockBroken = &h2.Error{Code: http2.ErrCodeProtocol, Reason: "a frame within a header block"}
	errContinuation      = &h2.Error{Code: http2.ErrCodeProtocol, Reason: "CONTINUATION without a header block"}
	errBlockTooLarge     = &h2.Error{Code: http2.ErrCodeEnhanceYourCalm, Reason: "header block exceeds its bound"}
	errStreamID          = &h2.Error{Code: http2.ErrCodeProtocol, Reason: "stream id not above every earlier one, or even"}
	errIdleStream        = &h2.Error{Code: http2.ErrCodeProtocol, Reason: "frame on an idle stream"}
	errClosedStream      = &h2.Error{Code: http2.ErrCodeStreamClosed, Reason: "frame on a closed stream"}
	errConnFlow          = &h2.Error{Code: http2.ErrCodeFlowControl, Reason: "connection receive window exceeded"}
	errSendWindow        = &h2.Error{Code: http2.ErrCodeFlowControl, Reason: "send window above 2^31-1"}
	errStreamClosedSt    = &h2.Error{Code: http2.ErrCodeStreamClosed, Stream: true, Reason: "frame on a half-closed stream"}
	// errHeaderListSt resets a stream whose header list passes -grpc.max-header-bytes with
	// the code grpc-go's server resets it with, so that a client sees one answer whichever
	// transport serves it.
	errHeaderListSt     = &h2.Error{Code: http2.ErrCodeFrameSize, Stream: true, Reason: "header list exceeds -grpc.max-header-bytes"}
	errDataClosedSt     = &h2.Error{Code: http2.ErrCodeStreamClosed, Stream: true, Reason: "DATA on a closed stream"}
	errStreamFlow       = &h2.Error{Code: http2.ErrCodeFlowControl, Stream: true, Reason: "stream receive window exceeded"}
	errStreamSendWindow = &h2.Error{Code: http2.ErrCodeFlowControl, Stream: true, Reason: "stream send window above 2^31-1"}
	errMalformed        = &h2.Error{Code: http2.ErrCodeProtocol, Stream: true, Reason: "malformed request"}
	errInvalidContinued = &h2.Error{Code: http2.ErrCodeProtocol, Reason: "CONTINUATION after a malformed field"}
	errRefused          = &h2.Error{Code: http2.ErrCodeRefusedStream, Stream: true, Reason: "MAX_CONCURRENT_STREAMS reached"}
	// grpc-go's keepalive enforcement, in its words: a client that pings more often than
	// -grpc.keepalive.min-time, more than maxPingStrikes times between two answers.
	errTooManyPings = &h2.Error{Code: http2.ErrCodeEnhanceYourCalm, Reason: "too_many_pings"}
)

// maxPingStrikes is how many early PINGs a connection is forgiven, as grpc-go forgives them.
const maxPingStrikes = 2

// stream returns the open stream id, nil when it is not open.
func (c *h2Conn) stream(id uint32) *h2Stream {
	for _, st := range c.mu.streams {
		if st.id == id {
			return st
		}
	}
	return nil
}

// resetWindow is how far below the highest stream id the client opened a reset is
// remembered: 2048 ids, the last 1024 streams.
const resetWindow = 2048

// resetBit is the word and bit of resets that stands for stream id.
func resetBit(id uint32) (int, uint64) {
	slot := (id >> 1) % (resetWindow / 2)
	return int(slot / 64), 1 << (slot % 64)
}

// recentlyReset reports whether the server reset stream id lately: its frames in flight are
// ignored.
func (c *h2Conn) recentlyReset(id uint32) bool {
	if id > c.lastID || c.lastID-id >= resetWindow {
		return false
	}
	w, b := resetBit(id)
	return c.resets[w]&b != 0
}

// openID makes id the highest stream id the client opened, clearing the reset bits of the
// ids it passes, which stood for streams a window older.
func (c *h2Conn) openID(id uint32) {
	if id <= c.lastID {
		return
	}
	if id-c.lastID >= resetWindow {
		c.resets = [len(c.resets)]uint64{}
	} else {
		for x := c.lastID + 1; x <= id; x++ {
			if x&1 == 1 {
				w, b := resetBit(x)
				c.resets[w] &^= b
			}
		}
	}
	c.openID(id)
}

// unknownStream is the error of a frame of type t on a stream that is not open: idle (never
// opened) is a connection error, closed is STREAM_CLOSED (RFC 9113 §5.1); nil for a stream
// reset lately, whose frame is ignored.
func (c *h2Conn) unknownStream(id uint32) error {
	switch {
	case id > c.lastID:
		return errIdleStream
	case c.recentlyReset(id):
		return nil
	}
	return errClosedStream
}

func (c *h2Conn) onData(f h2.Frame) error {
	d, err := f.Data()
	if err != nil {
		return err
	}
	// Flow control counts every DATA frame, whatever becomes of it (§6.9).
	c.recvConn -= int64(d.FlowLen)
	if c.recvConn < 0 {
		return errConnFlow
	}
	c.unacked += int64(d.FlowLen)
	st := c.stream(d.StreamID)
	if st == nil || st.remoteDone {
		if st != nil {
			return errStreamClosedSt
		}
		if err := c.unknownStream(d.StreamID); err != errClosedStream {
			return err
		}
		// DATA on a closed stream is a stream error (§6.1): frames of a stream reset longer
		// ago than c.resets remembers, or of one the client closed, reach here and must not
		// end the connection under its other calls. The reset it answers marks the stream,
		// so its further frames are ignored rather than each answered.
		return errDataClosedSt
	}
	st.recvWin -= int64(d.FlowLen)
	if st.recvWin < 0 {
		return errStreamFlow
	}
	// Set before the data is taken in: an answer it causes (a refusal) then knows whether
	// the client is done, and forgets the stream rather than reset it.
	st.remoteDone = d.EndStream
	if st.os.on && !st.answered {
		return c.streamData(st, d.Data, int64(d.FlowLen), d.EndStream)
	}
	st.unacked += int64(d.FlowLen)
	if err := st.data(c, d.Data); err != nil {
		return err
	}
	if st.answered {
		return nil
	}
	if d.EndStream {
		return c.endRemote(st)
	}
	// The stream's window comes back as its message is taken in.
	if !st.answered && !st.roomWait && st.unacked >= int64(c.s.cfg.InitialWindowSize)/4 {
		*c.mu.out = appendWindowUpdate(*c.mu.out, st.id, uint32(st.unacked))
		st.recvWin += st.unacked
		st.unacked = 0
	}
	return nil
}

func (c *h2Conn) onHeaders(f h2.Frame) error {
	h, err := f.Headers()
	if err != nil {
		if isStreamErr(err) {
			// The block must still be decoded to keep the table in step: a self-dependent
			// stream is the only stream error here, and its fragment is intact.
			if _, derr := c.dec.Decode(h.Fragment); derr != nil && !isStreamErr(derr) {
				return derr
			}
			c.openID(h.StreamID)
		}
		return err
	}
	c.hdrID, c.hdrEnd = h.StreamID, h.EndStream
	c.hdrBuf, c.hdrLast = append(c.hdrBuf[:0], h.Fragment...), 0
	if len(c.hdrBuf) > c.maxBlock {
		return errBlockTooLarge
	}
	if h.EndHeaders {
		return c.headerBlock()
	}
	return nil
}

func (c *h2Conn) onContinuation(f h2.Frame) error {
	if c.hdrID == 0 {
		return errContinuation
	}
	ct, err := f.Continuation()
	if err != nil {
		return err
	}
	if len(c.hdrBuf)+len(ct.Fragment) > c.maxBlock {
		return errBlockTooLarge // the CONTINUATION flood: the block is bounded, then the connection ends
	}
	c.hdrBuf, c.hdrLast = append(c.hdrBuf, ct.Fragment...), len(c.hdrBuf)
	if ct.EndHeaders {
		return c.headerBlock()
	}
	return nil
}

func isStreamErr(err error) bool {
	he, ok := err.(*h2.Error)
	return ok && he.Stream
}

// headerBlock handles a whole header block: a new call's headers, or a call's trailers.
func (c *h2Conn) headerBlock() error {
	id, end := c.hdrID, c.hdrEnd
	c.hdrID = 0
	fields, derr := c.dec.Decode(c.hdrBuf)
	if derr != nil && !isStreamErr(derr) {
		return derr // COMPRESSION_ERROR: the tables are out of step
	}
	if end, ok := c.dec.InvalidEnd(); derr == h2.ErrMalformedFields && ok && end <= c.hdrLast {
		// grpc-go's framer ends the connection at a CONTINUATION that follows a field it
		// refused as it passed (having stopped counting the list's size there).
		return errInvalidContinued
	}
	if st := c.stream(id); st != nil {
		// Trailers: they end the stream and carry no pseudo-fields (§8.1).
		if st.remoteDone {
			return errStreamClosedSt
		}
		if derr != nil {
			return derr
		}
		if !end || hasPseudo(fields) {
			return errMalformed
		}
		return c.endRemote(st)
	}
	switch {
	case id%2 == 0:
		return errStreamID
	case id <= c.lastID:
		if c.recentlyReset(id) {
			return nil
		}
		return errClosedStream
	}
	c.lastID = id
	if derr != nil {
		if derr == h2.ErrHeaderListTooLarge {
			// Counted in otlpgate_grpc_refused_streams_total{reason="header_too_large"} by the
			// frame watch, which sees the reset go out as it does grpc-go's (watch.go).
			return errHeaderListSt
		}
		return derr
	}
	if c.mu.final && id > c.mu.goawayID {
		return errRefused // after the last GOAWAY: the client retries it elsewhere
	}
	if len(c.mu.streams) >= int(c.s.cfg.MaxConcurrentStreams) {
		return errRefused
	}
	st := c.newStream(id)
	st.remoteDone = end
	if err := st.open(c, fields); err != nil {
		return err // reset, and so forgotten, by frame
	}
	if st.answered {
		return nil // refused, and so closed or reset
	}
	if end {
		return c.endRemote(st)
	}
	return nil
}

func hasPseudo(fields []h2.Field) bool {
	for _, f := range fields {
		if f.Name[0] == ':' {
			return true
		}
	}
	return false
}

func (c *h2Conn) onRSTStream(f h2.Frame) error {
	r, err := f.RSTStream()
	if err != nil {
		return err
	}
	st := c.stream(r.StreamID)
	if st == nil {
		if r.StreamID > c.lastID {
			return errIdleStream
		}
		return nil
	}
	st.remoteDone, st.localDone = true, true
	c.dropStream(st)
	return nil
}

func (c *h2Conn) onSettings(f h2.Frame) error {
	s, err := f.Settings(false)
	if err != nil {
		return err
	}
	c.settings = true
	if s.Ack {
		return nil
	}
	for i := range s.Len() {
		p := s.At(i)
		if p.ID == http2.SettingMaxFrameSize {
			c.mu.peerMaxFrame = p.Val
		}
		if p.ID != http2.SettingInitialWindowSize {
			continue
		}
		// §6.9.2: the change applies to every open stream's send window.
		delta := int64(p.Val) - c.mu.initWin
		c.mu.initWin = int64(p.Val)
		for _, st := range c.mu.streams {
			st.sendWin += delta
			if st.sendWin > h2.MaxWindow {
				return errSendWindow
			}
		}
	}
	*c.mu.out = appendSettings(*c.mu.out, true)
	c.flushParkedLocked()
	return nil
}

func (c *h2Conn) onPing(f h2.Frame) error {
	p, err := f.Ping()
	if err != nil {
		return err
	}
	if !p.Ack {
		// The ping flood (CVE-2019-9512) is bounded by grpc-go's rule: a PING sooner than
		// -grpc.keepalive.min-time after the last is a strike, and the third ends the
		// connection; an answer sent forgives them (resetStrikes).
		now := time.Now()
		if !c.lastPing.IsZero() && now.Sub(c.lastPing) < c.s.cfg.KeepaliveMinTime {
			c.strikes++
			if c.strikes > maxPingStrikes {
				return errTooManyPings
			}
		}
		c.lastPing = now
		*c.mu.out = appendPing(*c.mu.out, true, p.Data)
		return nil
	}
	if p.Data == drainPing && c.mu.goingAway && !c.mu.final {
		// The client saw the first GOAWAY: every stream it opened is known now.
		c.mu.final, c.mu.goawayID = true, c.lastID
		*c.mu.out = appendGoAway(*c.mu.out, c.lastID, http2.ErrCodeNo, "")
	}
	return nil
}

func (c *h2Conn) onWindowUpdate(f h2.Frame) error {
	w, err := f.WindowUpdate()
	if err != nil {
		return err
	}
	if w.StreamID == 0 {
		c.mu.sendConn += int64(w.Increment)
		if c.mu.sendConn > h2.MaxWindow {
			return errSendWindow
		}
		c.flushParkedLocked()
		return nil
	}
	st := c.stream(w.StreamID)
	if st == nil {
		if w.StreamID > c.lastID {
			return errIdleStream
		}
		return nil // §6.9: a closed stream's update is ignored
	}
	st.sendWin += int64(w.Increment)
	if st.sendWin > h2.MaxWindow {
		return errStreamSendWindow
	}
	c.flushParkedLocked()
	return nil
}

// resetLocked resets stream id with code: the stream, if open, ends and is forgotten; its
// late frames are ignored.
func (c *h2Conn) resetLocked(id uint32, code http2.ErrCode) {
	// CANCEL is the server's own reset of a call whose deadline passed, no error of the
	// client's.
	if code != http2.ErrCodeNo && code != http2.ErrCodeCancel {
		h2StreamErrors.Inc()
	}
	*c.mu.out = appendRSTStream(*c.mu.out, id, code)
	if id <= c.lastID && c.lastID-id < resetWindow {
		w, b := resetBit(id)
		c.resets[w] |= b
	}
	if st := c.stream(id); st != nil {
		st.remoteDone, st.localDone = true, true
		c.dropStream(st)
	}
}

// failLocked ends the connection for err: a GOAWAY with its code when it is an HTTP/2 error.
func (c *h2Conn) failLocked(err error) {
	if he, ok := err.(*h2.Error); ok {
		*c.mu.out = appendGoAway(*c.mu.out, c.lastID, he.Code, he.Reason)
		h2ConnErrors.Inc()
		c.flushLocked()
	}
}

// flushLocked writes what is waiting in out.
func (c *h2Conn) flushLocked() error {
	out := *c.mu.out
	if len(out) == 0 || c.mu.closed {
		return nil
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.RecvTimeout))
	_, err := c.nc.Write(out)
	*c.mu.out = out[:0]
	if err != nil {
		c.mu.closed = true
		return errConnDone
	}
	return nil
}

// close ends the connection and gives back what it holds, once every waiter returned.
func (c *h2Conn) close() {
	if c.kaTimer != nil {
		c.kaTimer.Stop()
	}
	if c.ageTimer != nil {
		c.ageTimer.Stop()
	}
	if c.graceTimer != nil {
		c.graceTimer.Stop()
	}
	c.cancel()
	c.raw.Close() // not the TLS connection's Close, which may wait to write its close_notify
	c.async.Wait()
	c.mu.Lock()
	c.mu.closed = true
	for len(c.mu.streams) > 0 {
		st := c.mu.streams[0]
		st.remoteDone, st.localDone = true, true
		c.dropStream(st)
	}
	pool.PutBytes(c.mu.out)
	c.mu.out = nil
	c.mu.Unlock()
	pool.PutBytes(c.rbuf)
	c.rbuf = nil
	c.s.h2.remove(c)
}

// keepalivePing is the PING of the server's keepalive.
var keepalivePing = [8]byte{'k', 'e', 'e', 'p', 'a', 'l', 'i', 'v'}

// keepalive runs on kaTimer: after -grpc.keepalive.time without a byte from the client it
// sends a PING, and closes the connection when nothing is read within -grpc.keepalive.timeout
// of it, as grpc-go's server does, so that a client gone without a word (a host that died, a
// path that broke) holds nothing for long.
func (c *h2Conn) keepalive() {
	if c.ctx.Err() != nil {
		return // the connection ended (close stops the timer, but a run may have begun)
	}
	ka, timeout := c.s.cfg.KeepaliveTime, c.s.cfg.KeepaliveTimeout
	now := time.Now().UnixNano()
	last := c.lastRead.Load()
	if c.kaSentAt != 0 {
		if last < c.kaSentAt {
			keepaliveCloses.Inc()
			c.raw.Close() // serve's read fails, and the connection ends
			return
		}
		c.kaSentAt = 0
	}
	if idle := time.Duration(now - last); idle < ka {
		c.kaTimer.Reset(ka - idle)
		return
	}
	c.mu.Lock()
	if c.mu.closed || !c.mu.started {
		c.mu.Unlock()
		return
	}
	*c.mu.out = appendPing(*c.mu.out, false, keepalivePing)
	c.flushLocked()
	c.mu.Unlock()
	c.kaSentAt = now
	c.kaTimer.Reset(timeout)
}

// discard closes a connection that was never served, giving back its buffer.
func (c *h2Conn) discard() {
	c.cancel()
	c.raw.Close()
	pool.PutBytes(c.mu.out)
	c.mu.out = nil
}

// goAway starts the shutdown of the connection: a GOAWAY that admits every stream (2^31-1)
// and a PING, whose ACK sends the last GOAWAY with the last stream id seen (RFC 9113 §6.8).
// Safe for concurrent use.
func (c *h2Conn) goAway() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.goingAway || c.mu.closed {
		return
	}
	c.mu.goingAway = true
	if !c.mu.started {
		return // serve sends it after its SETTINGS, which come first (RFC 9113 §3.4)
	}
	c.appendGoAwayLocked()
	c.flushLocked()
}

// appendGoAwayLocked appends the first GOAWAY of a shutdown and its PING.
func (c *h2Conn) appendGoAwayLocked() {
	*c.mu.out = appendGoAway(*c.mu.out, h2.MaxWindow, http2.ErrCodeNo, "")
	*c.mu.out = appendPing(*c.mu.out, false, drainPing)
}
