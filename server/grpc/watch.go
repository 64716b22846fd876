package grpcserver

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/internal/admission"
)

// watch follows the HTTP/2 frames of one connection, in clear text, to bound what gRPC holds
// for messages that are not finished: gRPC reads a message into memory as its DATA frames come,
// up to -grpc.max-recv-msg-size, with no time bound and no way for a handler to abandon it.
// The watch reads frame headers only (9 bytes a frame, and the 5-byte gRPC prefix of each
// message); payloads are skipped, never copied.
//
// Per open stream it knows whether a message is unfinished, since when, how much of it has
// arrived, and whether its client may send more (flow control). The clock of a stream's first message starts with its HEADERS, so that a call
// whose body never comes is bounded too; the clock of a later message starts with its first
// byte, so that an OTEP stream may wait between requests (up to -grpc.stream.max-age). The
// clock stops while the client cannot send because the server has not granted it window
// (HTTP/2 flow control: the handler is not reading, for reasons bounded elsewhere) and starts
// again, from zero, when window is granted.
//
// The read side runs on gRPC's reader goroutine, the write side on its writer goroutine, the
// sweep (conns.sweep) on its own: the stream table is under mu; each side's cursor belongs to
// its goroutine.
type watch struct {
	maxHeld int64 // -grpc.max-conn-recv-bytes
	window  int64 // the initial stream window the server grants (-grpc.http2.stream-window)
	// acct is the connection's intake limiter account, nil without a limiter: what its calls
	// reserved before their messages were let in is theirs to receive, whatever maxHeld says.
	acct   *admission.Account
	rd, wr cursor
	mu     struct {
		sync.Mutex
		streams  map[uint32]*msgState
		spare    []*msgState // states of ended streams, for the next ones: a call costs no allocation
		held     int64       // bytes of unfinished messages received
		reported int64       // the part of held counted in otlpgate_grpc_unfinished_bytes
		partial  int         // streams with a message unfinished (since != 0)
		released bool        // the connection closed: nothing of it is counted any more
	}
}

// msgState is one open stream, as the watch knows it.
type msgState struct {
	since   int64 // UnixNano when the unfinished message's clock started; 0: none unfinished
	held    int64 // bytes of the unfinished message received so far, prefix included
	window  int64 // bytes the client may still send on the stream
	prefixN int   // bytes of the message's 5-byte prefix received
	left    int64 // body bytes of the message still to come, once its prefix is complete
}

// cursor is a position in one direction's frame sequence.
type cursor struct {
	skip       int // bytes of the client preface still to pass (read side only)
	hdr        [9]byte
	hdrN       int
	typ, flags byte
	id         uint32
	left       int // payload bytes of the frame still to come
	// read side, DATA: the pad length byte is still to come; data bytes before the padding
	padPending bool
	dataLeft   int
	// write side, RST_STREAM and WINDOW_UPDATE: their first four payload bytes
	word  [4]byte
	wordN int
}

// HTTP/2 frame types and flags the watch looks at (RFC 9113, section 6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameWindowUpdate = 0x8

	flagEndStream = 0x1
	flagPadded    = 0x8

	errCodeFrameSize = 0x6

	clientPrefaceLen = 24 // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
)

var (
	unfinishedBytes atomic.Int64
	_               = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_grpc_unfinished_bytes",
		Help: "Bytes of gRPC messages received in part, over every connection (each connection at most -grpc.max-conn-recv-bytes, each message at most -grpc.recv-timeout).",
	}, func() float64 { return float64(unfinishedBytes.Load()) })
	headerTooLarge = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_refused_streams_total",
		Help: "gRPC streams reset before a handler ran, by reason: header_too_large (a header list past -grpc.max-header-bytes).",
	}, []string{"reason"}).WithLabelValues("header_too_large")
)

func (w *watch) init(cfg *Config) {
	w.maxHeld = cfg.connRecvBytes()
	w.window = int64(cfg.InitialWindowSize)
	w.rd.skip = clientPrefaceLen
	w.mu.streams = map[uint32]*msgState{}
}

// release gives the connection's unfinished bytes back to the gauge when it closes.
func (w *watch) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.mu.released {
		w.mu.released = true
		unfinishedBytes.Add(-w.mu.reported)
		w.mu.reported = 0
	}
}

// reportLocked brings the gauge up to date with held.
func (w *watch) reportLocked() {
	if !w.mu.released {
		unfinishedBytes.Add(w.mu.held - w.mu.reported)
		w.mu.reported = w.mu.held
	}
}

// overdue reports whether a message has been unfinished since before cutoff (UnixNano) while
// its client could send. Safe for concurrent use.
func (w *watch) overdue(cutoff int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.partial == 0 {
		return false
	}
	for _, st := range w.mu.streams {
		if st.since != 0 && st.since < cutoff && st.window > 0 {
			return true
		}
	}
	return false
}

// read follows the bytes gRPC read. It reports a reason to close the connection when its
// unfinished messages exceed maxHeld. gRPC's reader goroutine only.
func (w *watch) read(p []byte) (reason int, bad bool) {
	c := &w.rd
	var now int64
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.released {
		return 0, false
	}
	for len(p) > 0 {
		if c.skip > 0 {
			k := min(c.skip, len(p))
			c.skip -= k
			p = p[k:]
			continue
		}
		if c.hdrN < len(c.hdr) {
			k := copy(c.hdr[c.hdrN:], p)
			c.hdrN += k
			p = p[k:]
			if c.hdrN < len(c.hdr) {
				continue
			}
			c.begin()
			if now == 0 {
				now = time.Now().UnixNano()
			}
			w.readFrameLocked(c, now)
			if c.left == 0 {
				w.endReadFrameLocked(c)
			}
			continue
		}
		k := min(c.left, len(p))
		chunk := p[:k]
		p = p[k:]
		c.left -= k
		if c.typ == frameData {
			if c.padPending {
				c.padPending = false
				c.dataLeft = max(c.dataLeft-1-int(chunk[0]), 0)
				chunk = chunk[1:]
			}
			if d := min(len(chunk), c.dataLeft); d > 0 {
				c.dataLeft -= d
				if st := w.mu.streams[c.id]; st != nil {
					if now == 0 {
						now = time.Now().UnixNano()
					}
					w.feedLocked(st, chunk[:d], now)
				}
			}
		}
		if c.left == 0 {
			w.endReadFrameLocked(c)
		}
	}
	w.reportLocked()
	if limit := w.limit(); w.mu.held > limit && w.grantedLocked() > limit {
		return closeRecvBytes, true
	}
	return 0, false
}

// limit is what the connection's unfinished messages may hold beyond their windows before it
// is closed: maxHeld, plus what its calls reserved from the intake limiter. A unary call
// reserves -grpc.max-recv-msg-size before gRPC lets its message in (takeRecv) and gives the
// reservation back only once the message was read whole, so the messages the limiter admitted
// never count against maxHeld: a connection the limiter lets read four 15 MB messages at once
// (-intake.max-conn-bytes) is not closed for reading them, and the calls past its share wait
// and are refused one by one (RESOURCE_EXHAUSTED and RetryInfo). maxHeld bounds what no
// reservation covers: OTEP stream messages, which are read without one.
func (w *watch) limit() int64 {
	if w.acct == nil {
		return w.maxHeld
	}
	return w.maxHeld + w.acct.Held()
}

// grantedLocked sums what unfinished messages hold beyond the initial stream window. Within it
// a client may send without the server reading: that much per stream is what HTTP/2 flow
// control lets any client park (gRPC's own exposure, and many concurrent uploads on one
// connection hold it legitimately, each message moving a frame at a time). Beyond it, bytes
// arrive only because a handler is reading a large message (gRPC grants window to the message's
// end when the read begins), which is what a client that withholds the tail exploits.
func (w *watch) grantedLocked() int64 {
	var n int64
	for _, st := range w.mu.streams {
		if st.since != 0 && st.held > w.window {
			n += st.held - w.window
		}
	}
	return n
}

// begin decodes the frame header just completed.
func (c *cursor) begin() {
	h := c.hdr[:]
	c.left = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	c.typ, c.flags = h[3], h[4]
	c.id = binary.BigEndian.Uint32(h[5:]) & (1<<31 - 1)
	c.padPending = c.typ == frameData && c.flags&flagPadded != 0
	c.dataLeft = c.left
	c.wordN = 0
}

// readFrameLocked acts on a frame the client sent, once its header arrived.
func (w *watch) readFrameLocked(c *cursor, now int64) {
	switch c.typ {
	case frameHeaders:
		if c.id == 0 {
			return
		}
		if c.flags&flagEndStream != 0 {
			w.endStreamLocked(c.id) // no body at all, or trailers
			return
		}
		if _, ok := w.mu.streams[c.id]; !ok {
			// A new stream: its first message is expected now.
			var st *msgState
			if n := len(w.mu.spare); n > 0 {
				st = w.mu.spare[n-1]
				w.mu.spare = w.mu.spare[:n-1]
			} else {
				st = new(msgState)
			}
			*st = msgState{since: now, window: w.window}
			w.mu.streams[c.id] = st
			w.mu.partial++
		}
	case frameData:
		if st := w.mu.streams[c.id]; st != nil {
			st.window -= int64(c.left) // flow control counts the whole payload, padding included
		}
	case frameRSTStream:
		w.endStreamLocked(c.id)
	}
}

func (w *watch) endReadFrameLocked(c *cursor) {
	if c.typ == frameData && c.flags&flagEndStream != 0 {
		w.endStreamLocked(c.id)
	}
	c.hdrN = 0
}

// feedLocked follows the gRPC messages in data, DATA payload bytes of st's stream.
func (w *watch) feedLocked(st *msgState, data []byte, now int64) {
	for len(data) > 0 {
		if st.since == 0 {
			st.since = now
			w.mu.partial++
		}
		if st.prefixN < 5 {
			// Byte 0 is the compression flag, bytes 1 to 4 the body length, big-endian.
			if st.prefixN > 0 {
				st.left = st.left<<8 | int64(data[0])
			}
			st.prefixN++
			st.held++
			w.mu.held++
			data = data[1:]
			if st.prefixN == 5 && st.left == 0 {
				w.finishLocked(st)
			}
			continue
		}
		k := min(int64(len(data)), st.left)
		st.left -= k
		st.held += k
		w.mu.held += k
		data = data[k:]
		if st.left == 0 {
			w.finishLocked(st)
		}
	}
}

// finishLocked records that st's message arrived whole: gRPC hands it to the handler.
func (w *watch) finishLocked(st *msgState) {
	w.mu.held -= st.held
	w.mu.partial--
	st.since, st.held, st.prefixN, st.left = 0, 0, 0, 0
}

func (w *watch) endStreamLocked(id uint32) {
	st := w.mu.streams[id]
	if st == nil {
		return
	}
	if st.since != 0 {
		w.mu.held -= st.held
		w.mu.partial--
	}
	delete(w.mu.streams, id)
	w.mu.spare = append(w.mu.spare, st)
}

// write follows the bytes gRPC writes: the streams it ends, the window it grants, and the
// streams it refuses for their header list. gRPC's writer goroutine only.
func (w *watch) write(p []byte) {
	c := &w.wr
	for len(p) > 0 {
		if c.hdrN < len(c.hdr) {
			k := copy(c.hdr[c.hdrN:], p)
			c.hdrN += k
			p = p[k:]
			if c.hdrN < len(c.hdr) {
				continue
			}
			c.begin()
			if c.typ == frameHeaders && c.flags&flagEndStream != 0 && c.id != 0 {
				// Trailers: the call is over, whatever the client still sends.
				w.mu.Lock()
				w.endStreamLocked(c.id)
				w.reportLocked()
				w.mu.Unlock()
			}
			if c.left == 0 {
				c.hdrN = 0
			}
			continue
		}
		k := min(c.left, len(p))
		if c.typ == frameRSTStream || c.typ == frameWindowUpdate {
			n := copy(c.word[c.wordN:], p[:k])
			c.wordN += n
			if c.wordN == len(c.word) && n > 0 {
				w.wroteWord(c)
			}
		}
		p = p[k:]
		c.left -= k
		if c.left == 0 {
			c.hdrN = 0
		}
	}
}

// wroteWord acts on the payload word of a RST_STREAM or WINDOW_UPDATE the server sent.
func (w *watch) wroteWord(c *cursor) {
	v := binary.BigEndian.Uint32(c.word[:])
	w.mu.Lock()
	defer w.mu.Unlock()
	switch c.typ {
	case frameRSTStream:
		if v == errCodeFrameSize {
			// gRPC resets a stream with FRAME_SIZE_ERROR when its header list was cut off at
			// -grpc.max-header-bytes (transport.operateHeaders), before any handler ran.
			headerTooLarge.Inc()
		}
		w.endStreamLocked(c.id)
		w.reportLocked()
	case frameWindowUpdate:
		st := w.mu.streams[c.id]
		if st == nil {
			return
		}
		blocked := st.window <= 0
		st.window += int64(v & (1<<31 - 1))
		if blocked && st.since != 0 {
			// The client was waiting for us: its clock starts again.
			st.since = time.Now().UnixNano()
		}
	}
}
