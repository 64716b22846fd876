package uds

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Idle and read timeouts.
//
// gnet connections have no deadlines, so the intake keeps its own (with EngineNet too, so that
// both engines time out alike, and a read costs no timer): the event loop stamps each
// read (and the first read of a message it cannot finish yet) with a coarse clock, and the
// sweep goroutine (sweeper) sweeps the open connections a few times per timeout. The sweep only
// reads atomics; a connection it finds past a deadline is checked again on its own event loop,
// where its state is exact (the missing bytes may have arrived in between), and closed there;
// with EngineNet the sweep sets a past read deadline, and the connection's goroutine checks.
// The event loops never read the clock themselves, the sweep advances it, but for the first
// connection after the sweep slept: with nothing to watch it sleeps instead of ticking.

var (
	timeoutsVec = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_uds_timeouts_total",
		Help: "OpenCensus client connections closed by the intake, by kind: idle (nothing received for -uds.idle-timeout), read (a message left unfinished for -uds.read-timeout; the partial message is also counted as truncated).",
	}, []string{"kind"})
	idleTimeouts = timeoutsVec.WithLabelValues("idle")
	readTimeouts = timeoutsVec.WithLabelValues("read")
)

// timeoutKind says which deadline a connection passed.
type timeoutKind uint8

const (
	noTimeout timeoutKind = iota
	idleTimeout
	readTimeout
)

const (
	// sweepsPerTimeout is how many sweeps fit in the shortest timeout: a connection is closed
	// at most a quarter of its timeout late.
	sweepsPerTimeout = 4
	minSweep         = 5 * time.Millisecond
	maxSweep         = time.Second
)

// sweepEvery returns the period of the timeout sweep for cfg, 0 when both timeouts are off.
func sweepEvery(cfg *Config) time.Duration {
	var d time.Duration
	for _, t := range []time.Duration{cfg.IdleTimeout, cfg.ReadTimeout} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	if d == 0 {
		return 0
	}
	return min(max(d/sweepsPerTimeout, minSweep), maxSweep)
}

// coarseClock is the time the event loops stamp reads with: nanoseconds since the server was
// created (monotonic), plus one so that zero can mean "not set". Only the sweep advances it.
type coarseClock struct {
	epoch time.Time
	ns    atomic.Int64
}

func (c *coarseClock) init() {
	c.epoch = time.Now()
	c.ns.Store(1)
}

// now returns the time of the last advance. Safe for concurrent use.
func (c *coarseClock) now() int64 { return c.ns.Load() }

// advance reads the real clock and returns the new time. The sweep advances it, and an event
// loop that wakes the sweep: the clock only moves forward whichever stores last. Safe for
// concurrent use.
func (c *coarseClock) advance() int64 {
	n := int64(time.Since(c.epoch)) + 1
	for {
		old := c.ns.Load()
		if old >= n {
			return old
		}
		if c.ns.CompareAndSwap(old, n) {
			return n
		}
	}
}

// watchlist holds the open connections the sweep looks at.
type watchlist struct {
	mu struct {
		sync.Mutex
		// conns is unordered; each conn knows its index (watchIdx) for removal by swap.
		conns []*conn
	}
	// due collects the connections of one sweep; sweep goroutine only.
	due []*conn
}

// add starts watching c. Event loop of c only.
func (w *watchlist) add(c *conn) {
	w.mu.Lock()
	c.watchIdx = len(w.mu.conns)
	w.mu.conns = append(w.mu.conns, c)
	w.mu.Unlock()
}

// remove stops watching c. Event loop of c only.
func (w *watchlist) remove(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i, last := c.watchIdx, len(w.mu.conns)-1
	if i < 0 || i > last || w.mu.conns[i] != c {
		panic("BUG: uds: connection not in the watch list")
	}
	w.mu.conns[i] = w.mu.conns[last]
	w.mu.conns[i].watchIdx = i
	w.mu.conns[last] = nil
	w.mu.conns = w.mu.conns[:last]
	c.watchIdx = -1
}

// len returns the number of watched connections. Safe for concurrent use.
func (w *watchlist) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.mu.conns)
}

// noteRead stamps a read, and the first read of a message the read left unfinished. A message
// is known by its stream offset (Splitter.Pos): a client that pipelines messages back to back
// ends many reads inside one, and each of those is a new message with a fresh deadline. Event
// loop only.
func (c *conn) noteRead(now int64) {
	c.lastRead.Store(now)
	if c.split.Buffered() == 0 {
		if c.partialSince.Load() != 0 {
			c.partialSince.Store(0)
		}
		return
	}
	if pos := c.split.Pos(); c.partialSince.Load() == 0 || pos != c.partialPos {
		c.partialPos = pos
		c.partialSince.Store(now)
	}
}

// expired reports which deadline c has passed at now; a read timeout wins over an idle one.
// Safe for concurrent use: it reads atomics only.
func (c *conn) expired(now int64, idle, read time.Duration) timeoutKind {
	if since := c.partialSince.Load(); read > 0 && since != 0 && now-since >= int64(read) {
		return readTimeout
	}
	if idle > 0 && now-c.lastRead.Load() >= int64(idle) {
		return idleTimeout
	}
	return noTimeout
}

// sweeper runs the sweep every sweepEvery while a connection is watched, and sleeps while none
// is, until the event loop that opens one wakes it (OnOpen), or Shutdown stops it. It runs on
// its own goroutine, started by Start when a timeout is set.
func (s *Server) sweeper() {
	defer close(s.sweepDone)
	t := time.NewTicker(s.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.sweepStop:
			return
		case <-t.C:
		}
		s.sweep()
		// asleep is set before the list is looked at again, and OnOpen reads it after its add:
		// either this sees the connection, or OnOpen sees the flag and wakes the sweep.
		s.sweepAsleep.Store(true)
		if s.watch.len() > 0 {
			s.sweepAsleep.Store(false)
			continue
		}
		t.Stop()
		select {
		case <-s.sweepStop:
			return
		case <-s.sweepWake:
		}
		s.sweepAsleep.Store(false)
		t.Reset(s.sweepEvery)
	}
}

// wakeSweep wakes the sleeping sweep. A wake-up left while it was awake costs one extra pass.
// Safe for concurrent use.
func (s *Server) wakeSweep() {
	select {
	case s.sweepWake <- struct{}{}:
	default:
	}
}

// sweep advances the clock and queues an exact check on the event loop of every connection
// that looks expired. Sweep goroutine only.
func (s *Server) sweep() {
	now := s.clk.advance()
	idle, read := s.cfg.IdleTimeout, s.cfg.ReadTimeout
	w := &s.watch
	w.mu.Lock()
	for _, c := range w.mu.conns {
		// checking keeps a connection from being queued again while its check is pending.
		if c.expired(now, idle, read) != noTimeout && c.checking.CompareAndSwap(false, true) {
			w.due = append(w.due, c)
		}
	}
	w.mu.Unlock()
	for i, c := range w.due {
		if c.nc != nil {
			// EngineNet: the connection's goroutine checks again, woken from its read.
			c.nc.SetReadDeadline(pastDeadline)
			w.due[i] = nil
			continue
		}
		if err := c.loop.Execute(context.Background(), (*expiryCheck)(c)); err != nil {
			// The engine is shutting down and closes every connection anyway.
			c.checking.Store(false)
		}
		w.due[i] = nil
	}
	w.due = w.due[:0]
}

// expiryCheck is a conn seen as the gnet.Runnable that re-checks its deadlines on its loop.
type expiryCheck conn

// Run runs on the connection's event loop. The connection may have closed, or completed its
// message, since the sweep saw it.
func (e *expiryCheck) Run(context.Context) error {
	c := (*conn)(e)
	c.checking.Store(false)
	if c.closed {
		return nil
	}
	switch c.expired(c.s.clk.now(), c.s.cfg.IdleTimeout, c.s.cfg.ReadTimeout) {
	case noTimeout:
		return nil
	case idleTimeout:
		idleTimeouts.Inc()
	case readTimeout:
		readTimeouts.Inc()
	}
	// OnClose runs within this call: the partial message is discarded as truncated there.
	_ = c.loop.Close(c.gc)
	return nil
}
