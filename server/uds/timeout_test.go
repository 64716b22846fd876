package uds

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// healthy is a well-behaved client that sends one whole TRACE_EXPORT every few milliseconds
// on its own connection until stopped.
type healthy struct {
	stop chan struct{}
	done chan struct{}
	sent []string
	err  error
}

func startHealthy(h *harness, pid uint64) *healthy {
	c := h.dial()
	hc := &healthy{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(hc.done)
		defer c.Close()
		s := newStream(pid).init()
		// Bounded: 20000 messages 2 ms apart outlast any wait of these tests.
		for i := 0; i < 20000; i++ {
			select {
			case <-hc.stop:
				return
			default:
			}
			name := fmt.Sprintf("h%d", i)
			s.spans(name)
			if _, err := c.Write(s.buf); err != nil {
				hc.err = err
				return
			}
			hc.sent = append(hc.sent, name)
			s.buf = s.buf[:0]
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return hc
}

// finish stops the client and returns the span names it sent.
func (hc *healthy) finish(t testing.TB) []string {
	t.Helper()
	close(hc.stop)
	<-hc.done
	if hc.err != nil {
		t.Fatalf("the healthy connection broke: %v", hc.err)
	}
	if len(hc.sent) == 0 {
		t.Fatal("the healthy connection sent nothing")
	}
	return hc.sent
}

// TestReadTimeout: a client that sends a header and then one byte every 20 ms is cut off by
// the read timeout, its partial message counted as truncated; a healthy connection served by
// the same loops loses nothing.
func TestReadTimeout(t *testing.T) {
	readBefore, idleBefore := counter(readTimeouts), counter(idleTimeouts)
	truncated := counter(discarded[ocdaemon.ReasonTruncated])
	h := start(t, func(c *Config) { c.ReadTimeout = 200 * time.Millisecond })
	closed := h.s.closed.Load()
	good := startHealthy(h, 42)

	slow := h.dial()
	defer slow.Close()
	hdr := ocdaemon.Header{Type: ocdaemon.TraceExport, Seq: 1, PID: 7, Time: 1795262752.5, Len: 1000}
	write(t, slow, ocdaemon.AppendHeader(nil, &hdr), 0)
	// JSON never holds a zero byte, so each 'x' extends the message; finishing it would take
	// 20 s. A unix socket refuses writes once the server closed its end.
	var werr error
	for i := 0; i < 1500 && werr == nil; i++ {
		time.Sleep(20 * time.Millisecond)
		_, werr = slow.Write([]byte{'x'})
	}
	if werr == nil {
		t.Fatal("the slow client was not cut off within 30 s")
	}
	testkit.WaitFor(t, "the slow connection's close", func() bool { return h.s.closed.Load() == closed+1 })

	sent := good.finish(t)
	testkit.WaitFor(t, "the healthy connection's close", func() bool { return h.s.closed.Load() == closed+2 })
	h.shutdown()
	if got := spanNames(t, h.rec.Received())[42]; !slices.Equal(got, sent) {
		t.Fatalf("healthy connection: %d spans arrived, %d sent", len(got), len(sent))
	}
	if d := counter(readTimeouts) - readBefore; d != 1 {
		t.Errorf("read timeouts %v, want 1", d)
	}
	if d := counter(idleTimeouts) - idleBefore; d != 0 {
		t.Errorf("idle timeouts %v, want 0", d)
	}
	if d := counter(discarded[ocdaemon.ReasonTruncated]) - truncated; d != 1 {
		t.Errorf("truncated messages %v, want 1", d)
	}
}

// TestIdleTimeout: a connection that goes quiet is closed after the idle timeout, a busy one
// beside it is not.
func TestIdleTimeout(t *testing.T) {
	readBefore, idleBefore := counter(readTimeouts), counter(idleTimeouts)
	h := start(t, func(c *Config) { c.IdleTimeout = 2 * time.Second })
	closed := h.s.closed.Load()
	good := startHealthy(h, 43)

	quiet := h.dial()
	defer quiet.Close()
	write(t, quiet, newStream(44).init().spans("only").buf, 0)
	quiet.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := quiet.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("quiet connection: read %d, %v; want EOF from the server closing it", n, err)
	}
	if got := h.s.closed.Load(); got != closed+1 {
		t.Fatalf("%d connections closed, want only the quiet one", got-closed)
	}

	sent := good.finish(t)
	testkit.WaitFor(t, "the healthy connection's close", func() bool { return h.s.closed.Load() == closed+2 })
	h.shutdown()
	names := spanNames(t, h.rec.Received())
	if !slices.Equal(names[43], sent) || !slices.Equal(names[44], []string{"only"}) {
		t.Fatalf("spans: healthy %d of %d, quiet %v", len(names[43]), len(sent), names[44])
	}
	if d := counter(idleTimeouts) - idleBefore; d != 1 {
		t.Errorf("idle timeouts %v, want 1", d)
	}
	if d := counter(readTimeouts) - readBefore; d != 0 {
		t.Errorf("read timeouts %v, want 0", d)
	}
}

// TestDeadlines drives noteRead and expired with a hand-moved clock: a client that pipelines
// messages so that every read ends inside one is never timed out, however long it streams;
// one message that stays incomplete is.
func TestDeadlines(t *testing.T) {
	const read, idle = time.Second, 10 * time.Second
	cfg := DefaultConfig()
	cfg.ReadTimeout, cfg.IdleTimeout = read, idle
	srv, err := New(cfg, &testkit.Recorder{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(srv)
	defer c.close()
	s := newStream(5).init()
	initLen := len(s.buf)
	s.spans("s0")
	frameLen := len(s.buf) - initLen
	for i := 1; i < 40; i++ {
		s.spans(fmt.Sprintf("s%d", i))
	}
	now := int64(1)
	step := int64(read) * 6 / 10
	c.lastRead.Store(now)
	// Reads of 1.5 messages, 0.6 s apart, for 20 s: most end inside a new message.
	chunk := frameLen * 3 / 2
	off, partial := 0, 0
	for ; off+chunk < len(s.buf)-frameLen; off += chunk {
		now += step
		c.feed(s.buf[off : off+chunk])
		c.noteRead(now)
		if c.split.Buffered() > 0 {
			partial++
		}
		if k := c.expired(now+step, idle, read); k != noTimeout {
			t.Fatalf("after %d bytes over %v: timeout %d on a client that keeps finishing messages", off+chunk, time.Duration(now), k)
		}
	}
	if partial < 10 {
		t.Fatalf("only %d reads ended inside a message", partial)
	}
	// Now one byte at a time of the message the last read began: the deadline of that read
	// holds.
	since := c.partialSince.Load()
	if since == 0 {
		t.Fatal("the last read ended on a message boundary")
	}
	for now-since < int64(read) {
		if k := c.expired(now, idle, read); k != noTimeout {
			t.Fatalf("timed out %v into an incomplete message", time.Duration(now-since))
		}
		now += int64(read) / 10
		c.feed(s.buf[off : off+1])
		off++
		c.noteRead(now)
		if c.split.Buffered() == 0 {
			t.Fatal("a one-byte read finished a message; the test wants one incomplete message")
		}
	}
	if k := c.expired(now, idle, read); k != readTimeout {
		t.Fatalf("incomplete message for %v: timeout %d, want read", time.Duration(now-since), k)
	}
	// The rest arrives: no deadline left but the idle one.
	c.feed(s.buf[off:])
	c.noteRead(now)
	if c.split.Buffered() != 0 || c.partialSince.Load() != 0 {
		t.Fatalf("buffered %d, partial since %d after the whole stream", c.split.Buffered(), c.partialSince.Load())
	}
	if k := c.expired(now+int64(idle)-1, idle, read); k != noTimeout {
		t.Fatalf("timeout %d before the idle timeout", k)
	}
	if k := c.expired(now+int64(idle), idle, read); k != idleTimeout {
		t.Fatalf("timeout %d at the idle timeout, want idle", k)
	}
	if k := c.expired(now+int64(idle), 0, 0); k != noTimeout {
		t.Fatalf("timeout %d with both timeouts off", k)
	}
}

func TestSweepEvery(t *testing.T) {
	f := func(idle, read, want time.Duration) {
		t.Helper()
		cfg := Config{IdleTimeout: idle, ReadTimeout: read}
		if got := sweepEvery(&cfg); got != want {
			t.Errorf("idle %v read %v: sweep every %v, want %v", idle, read, got, want)
		}
	}
	f(0, 0, 0)
	f(time.Hour, 10*time.Second, time.Second)
	f(time.Hour, 0, time.Second)
	f(0, 200*time.Millisecond, 50*time.Millisecond)
	f(time.Second, 2*time.Second, 250*time.Millisecond)
	f(time.Millisecond, 0, 5*time.Millisecond)
}

// TestTimeoutsOff: with both timeouts at 0 there is no sweep and nothing is watched.
func TestTimeoutsOff(t *testing.T) {
	h := start(t, func(c *Config) { c.IdleTimeout, c.ReadTimeout = 0, 0 })
	c := h.dial()
	defer c.Close()
	write(t, c, newStream(3).init().spans("a").buf, 0)
	testkit.WaitFor(t, "the span", func() bool { return len(h.rec.Received()) == 1 })
	if h.s.sweepEvery != 0 || h.s.watch.len() != 0 {
		t.Fatalf("sweep every %v, %d watched", h.s.sweepEvery, h.s.watch.len())
	}
}

// TestWatchlist checks removal by swap keeps every index right.
func TestWatchlist(t *testing.T) {
	var w watchlist
	cs := make([]*conn, 5)
	for i := range cs {
		cs[i] = &conn{watchIdx: -1}
		w.add(cs[i])
	}
	for _, i := range []int{1, 4, 0} {
		w.remove(cs[i])
		if cs[i].watchIdx != -1 {
			t.Fatalf("removed conn keeps index %d", cs[i].watchIdx)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.mu.conns) != 2 {
		t.Fatalf("%d left, want 2", len(w.mu.conns))
	}
	for i, c := range w.mu.conns {
		if c.watchIdx != i || (c != cs[2] && c != cs[3]) {
			t.Fatalf("slot %d holds conn with index %d", i, c.watchIdx)
		}
	}
}

// TestNoTimeoutWhileConnecting guards the sweep's use of the watch list under concurrent
// opens and closes (run with -race): connections come and go while the sweep runs often.
func TestNoTimeoutWhileConnecting(t *testing.T) {
	idleBefore := counter(idleTimeouts)
	h := start(t, func(c *Config) { c.ReadTimeout = 20 * time.Millisecond })
	closed := h.s.closed.Load()
	var wg sync.WaitGroup
	const workers, each = 4, 50
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				c, err := net.Dial("unix", h.path)
				if err != nil {
					t.Error(err)
					return
				}
				c.Write(newStream(9).init().buf)
				c.Close()
			}
		}()
	}
	wg.Wait()
	testkit.WaitFor(t, "every close", func() bool { return h.s.closed.Load() == closed+workers*each })
	if n := h.s.watch.len(); n != 0 {
		t.Fatalf("%d connections still watched", n)
	}
	if d := counter(idleTimeouts) - idleBefore; d != 0 {
		t.Fatalf("idle timeouts %v", d)
	}
}
