package grpcserver

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
)

// frames builds HTTP/2 frames as a client or a server writes them.
type frames struct {
	buf bytes.Buffer
	fr  *http2.Framer
}

func newFrames(preface bool) *frames {
	f := &frames{}
	if preface {
		f.buf.WriteString(http2.ClientPreface)
	}
	f.fr = http2.NewFramer(&f.buf, nil)
	return f
}

func (f *frames) take() []byte {
	b := bytes.Clone(f.buf.Bytes())
	f.buf.Reset()
	return b
}

// grpcMsg is a gRPC message prefix declaring n body bytes, followed by body.
func grpcMsg(n int, body []byte) []byte {
	return append([]byte{0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

func testWatch(maxHeld int64) *watch {
	cfg := DefaultConfig()
	cfg.MaxConnRecvBytes = maxHeld
	cfg.InitialWindowSize = 64 << 10
	w := &watch{}
	w.init(&cfg)
	return w
}

// state returns held, partial and the number of streams known, checking the invariants that
// tie them to the streams' own counts.
func (w *watch) state(t *testing.T) (held int64, partial, streams int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum int64
	n := 0
	for _, st := range w.mu.streams {
		sum += st.held
		if st.since != 0 {
			n++
		} else if st.held != 0 {
			t.Fatalf("a stream holds %d bytes with no message unfinished", st.held)
		}
	}
	if sum != w.mu.held || n != w.mu.partial || w.mu.held < 0 {
		t.Fatalf("held %d (streams: %d), partial %d (streams: %d)", w.mu.held, sum, w.mu.partial, n)
	}
	return w.mu.held, w.mu.partial, len(w.mu.streams)
}

// feed hands b to the read side whole, or byte by byte.
func feed(w *watch, b []byte, bytewise bool) (bad bool) {
	if !bytewise {
		_, bad = w.read(b)
		return bad
	}
	for i := range b {
		if _, r := w.read(b[i : i+1]); r {
			bad = true
		}
	}
	return bad
}

// The watch follows what a client sends: a stream's first message is unfinished from its
// headers, later ones from their first byte; whole messages, padding, resets and ends leave
// nothing behind. Bytes arrive whole or one at a time, as TCP may cut them.
func TestWatchFollowsMessages(t *testing.T) {
	for _, bytewise := range []bool{false, true} {
		w := testWatch(1 << 20)
		c := newFrames(true)
		f := func(step string, wantHeld int64, wantPartial, wantStreams int) {
			t.Helper()
			if feed(w, c.take(), bytewise) {
				t.Fatalf("%s: closed", step)
			}
			if held, partial, streams := w.state(t); held != wantHeld || partial != wantPartial || streams != wantStreams {
				t.Fatalf("bytewise=%v %s: held %d, partial %d, streams %d; want %d, %d, %d",
					bytewise, step, held, partial, streams, wantHeld, wantPartial, wantStreams)
			}
		}
		c.fr.WriteSettings()
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}, EndHeaders: true})
		f("headers", 0, 1, 1)
		c.fr.WriteData(1, false, grpcMsg(10, make([]byte, 10)))
		f("a whole message", 0, 0, 1)
		c.fr.WriteData(1, false, grpcMsg(100, make([]byte, 30)))
		f("part of one", 35, 1, 1)
		c.fr.WriteDataPadded(1, false, make([]byte, 20), make([]byte, 50))
		f("more of it, padded", 55, 1, 1)
		c.fr.WriteData(1, false, append(append(make([]byte, 50), grpcMsg(0, nil)...), grpcMsg(7, []byte{1, 2})...))
		f("its end, an empty message, part of a third", 7, 1, 1)
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x82}, EndHeaders: true})
		c.fr.WriteData(3, false, grpcMsg(1000, make([]byte, 100)))
		f("a second stream", 112, 2, 2)
		c.fr.WriteRSTStream(1, http2.ErrCodeCancel)
		f("the first reset", 105, 1, 1)
		c.fr.WriteData(3, true, make([]byte, 900))
		f("the second ends whole", 0, 0, 0)
		c.fr.WriteData(5, false, grpcMsg(10, nil))
		f("data of a stream never opened", 0, 0, 0)
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: []byte{0x82}, EndHeaders: true, EndStream: true})
		f("a call without a body", 0, 0, 0)
	}
}

// What the server writes ends streams too: trailers, and resets, of which FRAME_SIZE_ERROR
// (a header list cut off at -grpc.max-header-bytes) is counted.
func TestWatchFollowsServer(t *testing.T) {
	w := testWatch(1 << 20)
	c := newFrames(true)
	for _, id := range []uint32{1, 3, 5} {
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x82}, EndHeaders: true})
		c.fr.WriteData(id, false, grpcMsg(100, make([]byte, 10)))
	}
	feed(w, c.take(), false)
	if held, partial, _ := w.state(t); held != 45 || partial != 3 {
		t.Fatalf("held %d, partial %d", held, partial)
	}
	before := testutil.ToFloat64(headerTooLarge)
	s := newFrames(false)
	s.fr.WriteSettings()
	s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}, EndHeaders: true, EndStream: true})
	s.fr.WriteRSTStream(3, http2.ErrCodeFrameSize)
	s.fr.WriteRSTStream(5, http2.ErrCodeNo)
	out := s.take()
	for i := range out { // the writer's buffer may cut frames anywhere
		w.write(out[i : i+1])
	}
	if held, partial, streams := w.state(t); held != 0 || partial != 0 || streams != 0 {
		t.Fatalf("after the server ended every stream: held %d, partial %d, streams %d", held, partial, streams)
	}
	if got := testutil.ToFloat64(headerTooLarge) - before; got != 1 {
		t.Fatalf("header_too_large counted %v, want 1", got)
	}
}

// A message is overdue only while its client may send: a client stopped by flow control waits
// for the server, and its clock starts again when window is granted.
func TestWatchOverdueOnlyWithWindow(t *testing.T) {
	w := testWatch(1 << 20)
	c := newFrames(true)
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}, EndHeaders: true})
	c.fr.WriteData(1, false, grpcMsg(200<<10, make([]byte, 16<<10-5)))
	feed(w, c.take(), false)
	later := time.Now().Add(time.Hour).UnixNano()
	if !w.overdue(later) {
		t.Fatal("an unfinished message with window left is not overdue an hour later")
	}
	for range 3 { // the rest of the 64 KiB window
		c.fr.WriteData(1, false, make([]byte, 16<<10))
	}
	feed(w, c.take(), false)
	if w.overdue(later) {
		t.Fatal("a client out of window is overdue")
	}
	s := newFrames(false)
	s.fr.WriteWindowUpdate(1, 64<<10)
	w.write(s.take())
	if w.overdue(time.Now().Add(-time.Minute).UnixNano()) {
		t.Fatal("the clock did not start again with the window")
	}
	if !w.overdue(later) {
		t.Fatal("not overdue an hour after the window was granted")
	}
}

// A closed connection gives its unfinished bytes back to the gauge, once.
func TestWatchRelease(t *testing.T) {
	w := testWatch(1 << 20)
	c := newFrames(true)
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}, EndHeaders: true})
	c.fr.WriteData(1, false, grpcMsg(5000, make([]byte, 996)))
	feed(w, c.take(), false)
	before := unfinishedBytes.Load()
	w.release()
	w.release()
	if got := before - unfinishedBytes.Load(); got != 1001 {
		t.Fatalf("release gave back %d bytes, want 1001", got)
	}
}

// The cap counts what unfinished messages hold beyond the initial stream window: within it,
// concurrent uploads of one connection may each park a message.
func TestWatchCapBeyondWindow(t *testing.T) {
	w := testWatch(1000)
	c := newFrames(true)
	for _, id := range []uint32{1, 3, 5} { // 3 × 64 KiB parked, nothing beyond the window
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x82}, EndHeaders: true})
		c.fr.WriteData(id, false, grpcMsg(1<<20, make([]byte, 16<<10-5)))
		for range 3 {
			c.fr.WriteData(id, false, make([]byte, 16<<10))
		}
	}
	if feed(w, c.take(), false) {
		t.Fatal("closed for messages within their window")
	}
	s := newFrames(false)
	s.fr.WriteWindowUpdate(1, 1<<20) // a handler reads stream 1's message
	w.write(s.take())
	c.fr.WriteData(1, false, make([]byte, 1000))
	if feed(w, c.take(), false) {
		t.Fatal("closed at the cap")
	}
	c.fr.WriteData(1, false, []byte{0})
	if reason, bad := w.read(c.take()); !bad || reason != closeRecvBytes {
		t.Fatalf("1001 bytes beyond the window past a cap of 1000: %v, %v", reason, bad)
	}
}

// Any bytes, cut anywhere, in either direction: the watch never panics and its counts hold
// together.
func FuzzWatch(f *testing.F) {
	c := newFrames(true)
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}, EndHeaders: true})
	c.fr.WriteDataPadded(1, false, grpcMsg(10, []byte{1, 2, 3}), []byte{0, 0})
	c.fr.WriteData(1, true, make([]byte, 7))
	c.fr.WriteRSTStream(3, http2.ErrCodeCancel)
	s := newFrames(false)
	s.fr.WriteWindowUpdate(1, 100)
	s.fr.WriteRSTStream(1, http2.ErrCodeFrameSize)
	f.Add(c.take(), s.take(), uint8(7))
	f.Fuzz(func(t *testing.T, in, out []byte, cut uint8) {
		w := testWatch(1 << 20)
		step := int(cut%64) + 1
		for len(in) > 0 || len(out) > 0 {
			k := min(step, len(in))
			w.read(in[:k])
			in = in[k:]
			k = min(step, len(out))
			w.write(out[:k])
			out = out[k:]
			w.state(t)
		}
		w.overdue(time.Now().UnixNano())
		w.release()
	})
}
