package uds

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/internal/rawio"
	"github.com/otlpgate/otlpgate/pool"
)

// EngineNet: the socket served by Go's network poller, a goroutine per connection.
//
// gnet's event loops wait for the socket in an epoll_wait system call that holds on to the
// loop's processor. When a client sends less often than every 10 ms, the runtime's monitor
// thread takes the processor back while the loop waits, and the loop's return from the call
// wakes the monitor, which then polls every 20 µs for a millisecond and longer: about sixty
// thread wake-ups for each message, most of the intake's CPU at 50 messages a second. A
// goroutine parked in the network poller holds no processor, and its reads are raw system
// calls (internal/rawio), so a message wakes only it.

// netReadSize is the read buffer of a connection, taken from the pool for a read and given
// back after it. A message longer than one read is carried by the connection's Splitter, as on
// gnet.
const netReadSize = 32 << 10

// pastDeadline is the read deadline that wakes a connection's goroutine at once.
var pastDeadline = time.Unix(1, 0)

// netEngine accepts on the socket and reads each connection on a goroutine of its own.
type netEngine struct {
	s  *Server
	ln *net.UnixListener
	wg sync.WaitGroup // the accept loop and the connections' goroutines
	// buffers counts the read buffers the connections hold (reader): none while they wait.
	buffers atomic.Int64

	mu struct {
		sync.Mutex
		conns   map[*conn]struct{}
		stopped bool
	}
}

// listenNet listens on the socket under its temporary name, publishes it and starts
// accepting. Called with s.mu held.
func (s *Server) listenNet() (*netEngine, error) {
	tmp := tempSocketPath(s.path)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err // what a start that died before its rename left
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // the name moves; Shutdown removes the socket (removeSocket)
	if err := s.publishSocket(); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	e := &netEngine{s: s, ln: ln}
	e.mu.conns = map[*conn]struct{}{}
	e.wg.Add(1)
	go e.accept()
	return e, nil
}

// accept takes connections until the listener closes. Errors other than the close (out of
// descriptors, say) are logged and waited out, a little longer each time, as net/http does.
func (e *netEngine) accept() {
	defer e.wg.Done()
	var delay time.Duration
	for {
		nc, err := e.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			e.s.log.Warn("accepting a socket connection failed; trying again", "err", err, "in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !e.s.claimConn() {
			nc.Close()
			continue
		}
		cs := newConn(e.s)
		cs.nc = nc
		e.mu.Lock()
		if e.mu.stopped {
			e.mu.Unlock()
			nc.Close()
			e.s.conns.Add(-1)
			return
		}
		e.mu.conns[cs] = struct{}{}
		e.wg.Add(1)
		e.mu.Unlock()
		go e.serve(cs)
	}
}

// serve reads cs until its client closes it, its timeout passes or the engine stops, and ends
// it. It owns cs as an event loop owns a gnet connection.
func (e *netEngine) serve(cs *conn) {
	defer e.wg.Done()
	s := e.s
	watched := s.sweepEvery > 0
	if watched {
		s.watchConn(cs)
	}
	rd := e.reader(cs)
	defer rd.close()
	for {
		b, err := rd.read()
		if len(b) > 0 {
			receivedBytes.Add(float64(len(b)))
			cs.feed(b)
			if watched {
				cs.noteRead(s.clk.now())
			}
		}
		rd.handled()
		if err == nil {
			continue
		}
		if watched && errors.Is(err, os.ErrDeadlineExceeded) && e.goesOn(cs) {
			continue // the sweep's deadline, and the connection is not past its timeout
		}
		break
	}
	// Ended before its client can see the close, as gnet's OnClose does.
	s.endConn(cs, watched)
	e.mu.Lock()
	delete(e.mu.conns, cs)
	e.mu.Unlock()
	cs.nc.Close()
}

// netReader reads a connection. With raw system calls (internal/rawio, the default) the
// buffer of a read is taken from the pool only when the socket has bytes, and given back once
// they are handled, so that an idle connection holds none; otherwise the connection keeps one
// buffer for its life.
type netReader struct {
	raw  *rawio.Conn // nil: reads go to nc
	nc   *net.UnixConn
	held *[]byte // the buffer of the last raw read, or the connection's own
	get  func() *[]byte
	put  func(*[]byte)
}

func (e *netEngine) reader(cs *conn) *netReader {
	r := &netReader{nc: cs.nc}
	r.raw, _ = rawio.Wrap(cs.nc).(*rawio.Conn)
	r.get = func() *[]byte {
		e.buffers.Add(1)
		return pool.GetBytes(netReadSize)
	}
	r.put = func(b *[]byte) {
		e.buffers.Add(-1)
		pool.PutBytes(b)
	}
	return r
}

// read returns the bytes of one read, valid until handled is called.
func (r *netReader) read() ([]byte, error) {
	if r.raw != nil {
		b, n, err := r.raw.ReadPooled(r.get, r.put)
		r.held = b
		if b == nil {
			return nil, err
		}
		return (*b)[:n], err
	}
	if r.held == nil {
		r.held = r.get()
	}
	b := (*r.held)[:cap(*r.held)]
	n, err := r.nc.Read(b)
	return b[:n], err
}

// handled runs once the bytes of a read are handled: a raw read's buffer goes back.
func (r *netReader) handled() {
	if r.raw != nil && r.held != nil {
		r.put(r.held)
		r.held = nil
	}
}

// close gives back the buffer still held.
func (r *netReader) close() {
	if r.held != nil {
		r.put(r.held)
		r.held = nil
	}
}

// goesOn runs when the sweep woke cs's read (timeout.go): it reports true when cs goes on
// reading, after the deadline is cleared, or counts its timeout and reports false, when cs
// passed it. The deadline is cleared before checking is, so that a sweep that finds cs past
// its time again after that sets a deadline this does not clear.
func (e *netEngine) goesOn(cs *conn) bool {
	cs.nc.SetReadDeadline(time.Time{})
	cs.checking.Store(false)
	switch cs.expired(e.s.clk.now(), e.s.cfg.IdleTimeout, e.s.cfg.ReadTimeout) {
	case idleTimeout:
		idleTimeouts.Inc()
		return false
	case readTimeout:
		readTimeouts.Inc()
		return false
	}
	return true
}

// stop closes the listener and every connection, and waits for their goroutines, or ctx. The
// socket file stays for Shutdown (removeSocket).
func (e *netEngine) stop(ctx context.Context) error {
	e.mu.Lock()
	e.mu.stopped = true
	e.ln.Close()
	for cs := range e.mu.conns {
		cs.nc.Close()
	}
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
