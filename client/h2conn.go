package client

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/internal/rawio"
)

// h2Conn is one HTTP/2 connection of otlpgate's own gRPC client (transport=otlpgate): h2c with
// prior knowledge, the calls of a destination's unary workers multiplexed on it.
//
// Goroutines: one reader (readLoop) parses every frame the server sends, in place in its read
// buffer, decodes header blocks with an h2.Decoder that keeps only what a call's result needs,
// answers SETTINGS and PING, credits windows and completes calls. The workers write: each its
// call's HEADERS (a frame built once per signal, only the stream id written) and its DATA,
// vectored straight from the batch's bytes.
//
// Invariants:
//  1. Stream ids go out in increasing order: an id is taken under wmu and its HEADERS frame
//     written before wmu is released.
//  2. Nobody waits (for a stream slot, for window) while holding wmu: the reader takes wmu to
//     answer a PING or credit a window, and must never wait behind a writer that waits for the
//     reader. Lock order: wmu, then mu.
//  3. A stream is in mu.streams from its HEADERS until it is completed; whoever removes it
//     (the reader on its end, RST_STREAM, GOAWAY or a broken connection; the worker on its
//     timeout) decides its fate. The reader completes a stream by one token on its done
//     channel, after it removed it.
type h2Conn struct {
	nc  net.Conn
	cfg *Config
	tls bool // nc is a *tls.Conn: DATA is gathered into wbuf, one record per round, not writev

	wmu  sync.Mutex // serialises writes to nc
	wbuf []byte     // control frames, built and written under wmu

	mu struct {
		sync.Mutex
		cond       sync.Cond // a slot, window or the connection's end
		streams    []*h2Stream
		nextID     uint32
		maxStreams int   // the peer's SETTINGS_MAX_CONCURRENT_STREAMS
		reserved   int   // slots taken: streams open or about to be
		connWindow int64 // what the peer still lets us send on the connection
		initWindow int64 // the peer's SETTINGS_INITIAL_WINDOW_SIZE
		maxFrame   int   // the peer's SETTINGS_MAX_FRAME_SIZE
		goaway     bool  // no new streams: GOAWAY came, or the connection ended
		err        error // why the connection ended
	}

	// The reader's own state.
	dec       *h2.Decoder
	rbuf      []byte
	block     []byte // a header block split over CONTINUATION frames, joined
	blockID   uint32 // its stream; 0 when no block is open
	blockEnd  bool   // the block's HEADERS frame had END_STREAM
	recvd     uint32 // DATA bytes taken since the last connection WINDOW_UPDATE
	lastRead  atomic.Int64
	pingSent  atomic.Int64               // nanotime of the keepalive PING not yet answered, 0 if none
	keepalive atomic.Pointer[time.Timer] // set once, after dialH2 made it: the tick may run first

	done        chan struct{} // closed when the reader returned
	settled     chan struct{} // closed when the server's first SETTINGS came
	gotSettings bool          // the reader's: settled is closed
}

// The own client's advertised settings. The connection window is opened to the destination's
// http2-conn-window at once; each stream gets http2-stream-window.
const (
	h2OurMaxFrame      = h2.DefaultMaxFrameSize
	h2MaxHeaderList    = 64 << 10
	h2DefaultWindow    = 65535
	h2MaxFramesPerCall = 64 // DATA frames written with one writev at most
)

// h2ClientKeep are the fields of an answer a call's result is made of.
var h2ClientKeep = []string{":status", "content-type", "grpc-status", "grpc-message", "grpc-status-details-bin"}

const (
	keepStatus = iota
	keepContentType
	keepGRPCStatus
	keepGRPCMessage
	keepGRPCDetails
)

var (
	errH2GoAway     = errors.New("client: the upstream sent GOAWAY")
	errH2Closed     = errors.New("client: connection closed")
	errH2Protocol   = errors.New("client: HTTP/2 protocol error from the upstream")
	errH2FlowWindow = errors.New("client: the upstream overflowed a flow-control window")
)

// dialH2 connects to addr and opens the HTTP/2 connection: the preface, our SETTINGS and the
// connection window. It does not wait for the server's SETTINGS: until they come, RFC 9113's
// defaults apply (§6.5.2), which every server must accept.
func dialH2(addr string, cfg *Config, tc *tls.Config, timeout time.Duration) (*h2Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("cannot dial %s: %w", addr, err)
	}
	nc = rawio.Wrap(nc)
	if tc != nil {
		tlsConn := tls.Client(nc, tc)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := tlsConn.HandshakeContext(ctx)
		cancel()
		if err == nil && tlsConn.ConnectionState().NegotiatedProtocol != "h2" {
			err = errors.New("the server did not agree to HTTP/2 (ALPN h2)")
		}
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		nc = tlsConn
	}
	c := &h2Conn{
		tls:     tc != nil,
		nc:      nc,
		cfg:     cfg,
		done:    make(chan struct{}),
		settled: make(chan struct{}),
		dec: h2.NewDecoder(h2.Config{HeaderTableSize: 4096, MaxHeaderListSize: h2MaxHeaderList,
			Keep: h2ClientKeep, MaxKeptFields: 16}),
		rbuf: make([]byte, 0, max(cfg.ReadBufferSize, 2*(h2.FrameHeaderLen+h2OurMaxFrame))),
	}
	c.mu.cond.L = &c.mu.Mutex
	c.mu.nextID = 1
	c.mu.maxStreams = 1 << 30
	c.mu.connWindow = h2DefaultWindow
	c.mu.initWindow = h2DefaultWindow
	c.mu.maxFrame = h2.DefaultMaxFrameSize
	c.mu.streams = make([]*h2Stream, 0, cfg.Concurrency*3)
	b := append(make([]byte, 0, 128), h2.ClientPreface...)
	b = appendSettings(b, []http2.Setting{
		{ID: http2.SettingEnablePush, Val: 0},
		{ID: http2.SettingInitialWindowSize, Val: uint32(cfg.InitialWindowSize)},
		{ID: http2.SettingMaxHeaderListSize, Val: h2MaxHeaderList},
	})
	if inc := int64(cfg.InitialConnWindowSize) - h2DefaultWindow; inc > 0 {
		b = appendWindowUpdate(b, 0, uint32(inc))
	}
	if _, err := nc.Write(b); err != nil {
		nc.Close()
		return nil, fmt.Errorf("cannot open HTTP/2 on %s: %w", addr, err)
	}
	c.lastRead.Store(nanotime())
	if cfg.KeepaliveTime > 0 {
		c.keepalive.Store(time.AfterFunc(cfg.KeepaliveTime, c.keepaliveTick))
	}
	return c, nil
}

func appendSettings(b []byte, s []http2.Setting) []byte {
	b = h2.AppendFrameHeader(b, h2.FrameHeader{Length: uint32(6 * len(s)), Type: http2.FrameSettings})
	for _, x := range s {
		b = binary.BigEndian.AppendUint16(b, uint16(x.ID))
		b = binary.BigEndian.AppendUint32(b, x.Val)
	}
	return b
}

func appendWindowUpdate(b []byte, id, inc uint32) []byte {
	b = h2.AppendFrameHeader(b, h2.FrameHeader{Length: 4, Type: http2.FrameWindowUpdate, StreamID: id})
	return binary.BigEndian.AppendUint32(b, inc)
}

// usable reports whether new calls may go on the connection. Safe for concurrent use.
func (c *h2Conn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.mu.goaway
}

// writeControl writes a frame the reader (or the keepalive) sends. Safe for concurrent use.
func (c *h2Conn) writeControl(build func([]byte) []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = build(c.wbuf[:0])
	_, err := c.nc.Write(c.wbuf)
	return err
}

// keepaliveTick runs every KeepaliveTime on the timer's goroutine: while calls are open and
// nothing was read for that long it pings, and closes the connection when a ping stays
// unanswered for KeepaliveTimeout. Like grpc-go's client it never pings an idle connection,
// so that it stays within grpc-go servers' default policy (no pings without calls).
func (c *h2Conn) keepaliveTick() {
	now := nanotime()
	c.mu.Lock()
	open, ended := len(c.mu.streams), c.mu.err != nil
	c.mu.Unlock()
	if ended {
		return
	}
	next := c.cfg.KeepaliveTime
	switch sent := c.pingSent.Load(); {
	case sent != 0 && c.lastRead.Load() < sent:
		if now-sent >= int64(c.cfg.KeepaliveTimeout) {
			c.fail(errors.New("client: keepalive ping not answered"))
			return
		}
		next = time.Duration(sent + int64(c.cfg.KeepaliveTimeout) - now)
	case open > 0 && now-c.lastRead.Load() >= int64(c.cfg.KeepaliveTime):
		c.pingSent.Store(now)
		if err := c.writeControl(func(b []byte) []byte {
			b = h2.AppendFrameHeader(b, h2.FrameHeader{Length: 8, Type: http2.FramePing})
			return binary.BigEndian.AppendUint64(b, uint64(now))
		}); err != nil {
			c.fail(err)
			return
		}
		next = c.cfg.KeepaliveTimeout
	default:
		c.pingSent.Store(0)
	}
	if t := c.keepalive.Load(); t != nil {
		t.Reset(next)
	}
}

// fail ends the connection: every open call is completed as failed (retryable) and nc closed,
// which ends the reader. Safe for concurrent use; the first cause wins.
func (c *h2Conn) fail(err error) {
	c.mu.Lock()
	if c.mu.err == nil {
		c.mu.err = err
	}
	c.mu.goaway = true
	streams := c.mu.streams
	c.mu.streams = c.mu.streams[:0]
	c.mu.cond.Broadcast()
	for _, st := range streams {
		st.open = false
		st.finish(err, false)
	}
	c.mu.Unlock()
	c.nc.Close()
}

// readLoop is the connection's reader goroutine.
func (c *h2Conn) readLoop() {
	defer close(c.done)
	err := c.read()
	c.fail(err)
	if t := c.keepalive.Load(); t != nil {
		t.Stop()
	}
}

func (c *h2Conn) read() error {
	buf := c.rbuf
	for {
		if len(buf) == cap(buf) {
			return errH2Protocol // a frame larger than the buffer: NextFrame refuses those
		}
		n, err := c.nc.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			c.lastRead.Store(nanotime())
		}
		buf = buf[:len(buf)+n]
		off := 0
		for {
			f, fn, ferr := h2.NextFrame(buf[off:], h2OurMaxFrame)
			if ferr != nil {
				return ferr
			}
			if fn == 0 {
				break
			}
			off += fn
			if err := c.frame(f); err != nil {
				return err
			}
		}
		buf = buf[:copy(buf, buf[off:])]
		if err != nil {
			if err == io.EOF {
				return errH2Closed
			}
			return err
		}
	}
}

// frame handles one frame on the reader.
func (c *h2Conn) frame(f h2.Frame) error {
	if c.blockID != 0 && f.Type != http2.FrameContinuation {
		return errH2Protocol // §6.10: nothing may come between a HEADERS and its CONTINUATIONs
	}
	switch f.Type {
	case http2.FrameSettings:
		s, err := f.Settings(true)
		if err != nil {
			return err
		}
		if s.Ack {
			return nil
		}
		if err := c.settings(s); err != nil {
			return err
		}
		if !c.gotSettings {
			c.gotSettings = true
			close(c.settled)
		}
		return c.writeControl(func(b []byte) []byte {
			return h2.AppendFrameHeader(b, h2.FrameHeader{Type: http2.FrameSettings, Flags: http2.FlagSettingsAck})
		})
	case http2.FramePing:
		p, err := f.Ping()
		if err != nil {
			return err
		}
		if p.Ack {
			c.pingSent.Store(0)
			return nil
		}
		return c.writeControl(func(b []byte) []byte {
			b = h2.AppendFrameHeader(b, h2.FrameHeader{Length: 8, Type: http2.FramePing, Flags: http2.FlagPingAck})
			return append(b, p.Data[:]...)
		})
	case http2.FrameWindowUpdate:
		w, err := f.WindowUpdate()
		if err != nil {
			return err
		}
		return c.credit(w.StreamID, int64(w.Increment))
	case http2.FrameHeaders:
		h, err := f.Headers()
		if err != nil {
			return err
		}
		if h.EndHeaders {
			return c.headers(h.StreamID, h.Fragment, h.EndStream)
		}
		c.blockID, c.blockEnd = h.StreamID, h.EndStream
		c.block = append(c.block[:0], h.Fragment...)
	case http2.FrameContinuation:
		ct, err := f.Continuation()
		if err != nil {
			return err
		}
		if ct.StreamID != c.blockID {
			return errH2Protocol
		}
		if len(c.block)+len(ct.Fragment) > h2MaxHeaderList {
			return errH2Protocol
		}
		c.block = append(c.block, ct.Fragment...)
		if ct.EndHeaders {
			id := c.blockID
			c.blockID = 0
			return c.headers(id, c.block, c.blockEnd)
		}
	case http2.FrameData:
		d, err := f.Data()
		if err != nil {
			return err
		}
		return c.data(d)
	case http2.FrameRSTStream:
		r, err := f.RSTStream()
		if err != nil {
			return err
		}
		if st := c.remove(r.StreamID); st != nil {
			st.finish(rstError(r.Code), r.Code == http2.ErrCodeRefusedStream)
		}
		return c.drained()
	case http2.FrameGoAway:
		g, err := f.GoAway()
		if err != nil {
			return err
		}
		return c.goAway(g.LastStreamID)
	case http2.FramePushPromise:
		return f.PushPromise()
	}
	return nil // PRIORITY and unknown types are ignored (§5.5)
}

// settings applies the server's parameters.
func (c *h2Conn) settings(s h2.Settings) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range s.Len() {
		x := s.At(i)
		switch x.ID {
		case http2.SettingMaxConcurrentStreams:
			c.mu.maxStreams = int(min(x.Val, 1<<30))
		case http2.SettingInitialWindowSize:
			delta := int64(x.Val) - c.mu.initWindow
			c.mu.initWindow = int64(x.Val)
			for _, st := range c.mu.streams {
				st.window += delta // §6.9.2: every open stream's window moves by the change
				if st.window > h2.MaxWindow {
					return errH2FlowWindow
				}
			}
		case http2.SettingMaxFrameSize:
			c.mu.maxFrame = int(x.Val)
		}
	}
	c.mu.cond.Broadcast()
	return nil
}

// credit adds a WINDOW_UPDATE's increment to the connection's window or a stream's.
func (c *h2Conn) credit(id uint32, inc int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == 0 {
		c.mu.connWindow += inc
		if c.mu.connWindow > h2.MaxWindow {
			return errH2FlowWindow
		}
	} else if st := c.findLocked(id); st != nil {
		st.window += inc
		if st.window > h2.MaxWindow {
			return errH2FlowWindow // a stream error by the RFC; the call fails either way
		}
	}
	c.mu.cond.Broadcast()
	return nil
}

func (c *h2Conn) findLocked(id uint32) *h2Stream {
	for _, st := range c.mu.streams {
		if st.id == id {
			return st
		}
	}
	return nil
}

// remove takes stream id out of the open streams, nil if it is not open (any more).
func (c *h2Conn) remove(id uint32) *h2Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removeLocked(id)
}

func (c *h2Conn) removeLocked(id uint32) *h2Stream {
	for i, st := range c.mu.streams {
		if st.id == id {
			st.open = false
			last := len(c.mu.streams) - 1
			c.mu.streams[i] = c.mu.streams[last]
			c.mu.streams[last] = nil
			c.mu.streams = c.mu.streams[:last]
			c.mu.reserved--
			c.mu.cond.Broadcast()
			return st
		}
	}
	return nil
}

// headers decodes a header block, always (the HPACK context is the connection's), and gives
// its fields to the stream: the answer's headers, its trailers, or both at once.
func (c *h2Conn) headers(id uint32, block []byte, end bool) error {
	fields, err := c.dec.Decode(block)
	if err != nil {
		if he, ok := err.(*h2.Error); !ok || !he.Stream {
			return err // the HPACK context is lost: the connection is
		}
	}
	// The stream's fields are written under mu: a worker that gives up on its call removes
	// the stream under mu and may reuse it at once.
	c.mu.Lock()
	st := c.findLocked(id)
	if st != nil && err == nil {
		st.takeFields(fields)
	}
	c.mu.Unlock()
	if st == nil {
		return nil // a stream the worker gave up on (RST_STREAM sent): its answer is dropped
	}
	if err != nil { // over the header list bound: the answer cannot be read
		if c.reset(st, http2.ErrCodeProtocol) {
			st.finish(status.Error(codes.Internal, "the upstream's answer headers are over their bound"), false)
		}
		return c.drained()
	}
	if end {
		return c.end(id)
	}
	return nil
}

// end completes a stream the server ended, and ends the reader when the connection takes no
// new streams and that was its last.
func (c *h2Conn) end(id uint32) error {
	if st := c.remove(id); st != nil {
		st.finish(nil, false)
	}
	return c.drained()
}

// drained is errH2GoAway when the connection takes no new streams and has none open.
func (c *h2Conn) drained() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.goaway && len(c.mu.streams) == 0 {
		return errH2GoAway
	}
	return nil
}

// data takes a DATA frame's bytes into its stream's answer and credits both windows back, the
// connection's in one WINDOW_UPDATE per half window taken, the stream's likewise (an answer
// is small: a stream's window is rarely credited at all).
func (c *h2Conn) data(d h2.Data) error {
	c.recvd += d.FlowLen
	if c.recvd >= uint32(c.cfg.InitialConnWindowSize)/2 {
		inc := c.recvd
		c.recvd = 0
		if err := c.writeControl(func(b []byte) []byte { return appendWindowUpdate(b, 0, inc) }); err != nil {
			return err
		}
	}
	var inc uint32
	var overflow bool
	c.mu.Lock()
	st := c.findLocked(d.StreamID)
	switch {
	case st == nil:
	case st.bidi:
		// A stream's answers, which its receiver takes out as they come (h2Bidi.RecvMsg); the
		// window is credited as they arrive, as a call's, so that an answer larger than the
		// window can come whole. What the receiver has not taken is bounded: a window and the
		// largest answer it reads, which answers to the requests a stream has in flight (a few
		// bytes each) never come near.
		if overflow = len(st.resp)+len(d.Data) > int(c.cfg.InitialWindowSize)+5+c.cfg.MaxRecvMsgSize; !overflow {
			st.resp = append(st.resp, d.Data...)
			st.recvd += d.FlowLen
			if !d.EndStream && st.recvd >= uint32(c.cfg.InitialWindowSize)/2 {
				inc, st.recvd = st.recvd, 0
			}
		}
	default: // under mu, as in headers
		st.take(d.Data, c.cfg.MaxRecvMsgSize)
		st.recvd += d.FlowLen
		if !d.EndStream && st.recvd >= uint32(c.cfg.InitialWindowSize)/2 {
			inc, st.recvd = st.recvd, 0
		}
	}
	c.mu.Unlock()
	if st == nil {
		return nil
	}
	if overflow {
		if c.reset(st, http2.ErrCodeEnhanceYourCalm) {
			st.finish(status.Error(codes.ResourceExhausted, "the upstream sent more answers than the stream reads"), false)
		}
		return c.drained()
	}
	if st.bidi && len(d.Data) > 0 {
		select {
		case st.more <- struct{}{}:
		default: // the receiver has a wake-up coming
		}
	}
	if inc > 0 {
		if err := c.writeControl(func(b []byte) []byte { return appendWindowUpdate(b, d.StreamID, inc) }); err != nil {
			return err
		}
	}
	if d.EndStream {
		return c.end(d.StreamID)
	}
	return nil
}

// goAway stops new streams on the connection and completes those above last, which the
// server did not and will not process, as refused: they go again on a new connection. The
// others finish as usual; the connection closes once none is left.
func (c *h2Conn) goAway(last uint32) error {
	c.mu.Lock()
	c.mu.goaway = true
	kept := c.mu.streams[:0]
	for _, st := range c.mu.streams {
		if st.id > last {
			c.mu.reserved--
			st.open = false
			st.finish(errH2GoAway, true)
			continue
		}
		kept = append(kept, st)
	}
	clear(c.mu.streams[len(kept):])
	c.mu.streams = kept
	c.mu.cond.Broadcast()
	idle := len(kept) == 0
	c.mu.Unlock()
	if idle {
		return errH2GoAway
	}
	return nil
}

// reset ends a stream from this side with RST_STREAM, if it is still open. It reports whether
// it was: if not, the reader completed it and its token is on the way.
func (c *h2Conn) reset(st *h2Stream, code http2.ErrCode) bool {
	c.mu.Lock()
	// st.open first: a stream not open on c may carry the id of an earlier stream of another
	// connection, which on c is someone else's.
	found := st.open && c.removeLocked(st.id) != nil
	c.mu.Unlock()
	if !found {
		return false
	}
	_ = c.writeControl(func(b []byte) []byte {
		b = h2.AppendFrameHeader(b, h2.FrameHeader{Length: 4, Type: http2.FrameRSTStream, StreamID: st.id})
		return binary.BigEndian.AppendUint32(b, uint32(code))
	})
	return true
}

// cause is why the connection ended, nil while it runs.
func (c *h2Conn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}
