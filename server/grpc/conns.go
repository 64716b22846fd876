package grpcserver

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// conns owns the intake's connections beyond what gRPC does for them: the per-peer cap, a
// registry by remote address through which a handler finds its connection (to close it when
// gRPC offers no finer way to free what a stream holds), and the frame watch of each one
// (watch.go) with the sweep that enforces -grpc.recv-timeout.
//
// gRPC gives a handler no handle on its connection, only the peer's address; one listener
// never has two live connections from the same address and port, so the address is the key.
type conns struct {
	cfg  *Config
	stop chan struct{}
	done chan struct{}
	wake sweepWake // signalled by add: the sweep sleeps while no connection is open
	// passes counts the sweep's passes over the connections, for tests.
	passes atomic.Int64
	mu     struct {
		sync.Mutex
		byAddr  map[string]*conn
		perPeer map[netip.Addr]int
	}
}

// Reasons a connection is closed by otlpgate rather than by its client.
const (
	closeRecvTimeout = iota
	closeRecvBytes
	closeAnswers
	numCloseReasons
)

var closeReasonNames = [numCloseReasons]string{"recv_timeout", "recv_bytes", "answers_not_taken"}

var (
	closedConnsVec = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_closed_connections_total",
		Help: "gRPC connections otlpgate closed, by reason: recv_timeout (a message unfinished past -grpc.recv-timeout), recv_bytes (unfinished messages past -grpc.max-conn-recv-bytes), answers_not_taken (an OTEP stream's answers not taken within -grpc.stream.answer-timeout).",
	}, []string{"reason"})
	closedConns = func() (c [numCloseReasons]prometheus.Counter) {
		for i := range c {
			c[i] = closedConnsVec.WithLabelValues(closeReasonNames[i])
		}
		return c
	}()
	refusedPerPeer = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_grpc_refused_connections_total",
		Help: "gRPC connections closed as soon as accepted, by reason: per_peer (the client address already had -grpc.max-connections-per-peer).",
	}, []string{"reason"}).WithLabelValues("per_peer")
	openConns = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "otlpgate_grpc_connections",
		Help: "gRPC connections open (at most -grpc.max-connections).",
	})
)

func newConns(cfg *Config) *conns {
	cs := &conns{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), wake: newSweepWake()}
	cs.mu.byAddr = map[string]*conn{}
	cs.mu.perPeer = map[netip.Addr]int{}
	return cs
}

// add registers c, or reports false when its peer already has MaxConnectionsPerPeer.
func (cs *conns) add(nc net.Conn) (*conn, bool) {
	addr := nc.RemoteAddr().String()
	ip := netip.Addr{}
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		ip = ap.Addr().Unmap()
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if max := cs.cfg.MaxConnectionsPerPeer; max > 0 && cs.mu.perPeer[ip] >= max {
		return nil, false
	}
	cs.mu.perPeer[ip]++
	c := &conn{Conn: nc, cs: cs, addr: addr, peer: ip, plain: true}
	c.w.init(cs.cfg)
	if bc, ok := nc.(*budgetConn); ok {
		c.w.acct = bc.acct
	}
	cs.mu.byAddr[addr] = c
	openConns.Inc()
	cs.wake.signal()
	return c, true
}

func (cs *conns) remove(c *conn) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.mu.byAddr[c.addr] == c {
		delete(cs.mu.byAddr, c.addr)
	}
	if n := cs.mu.perPeer[c.peer] - 1; n > 0 {
		cs.mu.perPeer[c.peer] = n
	} else {
		delete(cs.mu.perPeer, c.peer)
	}
	openConns.Dec()
}

// of returns the connection of a call, from the peer address gRPC put in its context; nil
// when it is not one of ours (the handlers then end the call alone). Safe for concurrent use.
func (cs *conns) of(ctx context.Context) *conn {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mu.byAddr[p.Addr.String()]
}

// sweep closes, every tick, the connections holding a message unfinished past RecvTimeout. It
// sleeps while no connection is open (sweepWake).
func (cs *conns) sweep() {
	defer close(cs.done)
	tick := min(max(cs.cfg.RecvTimeout/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	var late []*conn
	for {
		select {
		case <-cs.stop:
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-cs.cfg.RecvTimeout).UnixNano()
		late = late[:0]
		cs.mu.Lock()
		empty := len(cs.mu.byAddr) == 0
		for _, c := range cs.mu.byAddr {
			if c.w.overdue(cutoff) {
				late = append(late, c)
			}
		}
		cs.mu.Unlock()
		cs.passes.Add(1)
		if empty {
			if !cs.wake.sleep(t, tick, cs.stop) {
				return
			}
			continue
		}
		for i, c := range late {
			c.kill(closeRecvTimeout)
			late[i] = nil
		}
	}
}

// listener applies the per-peer cap and wraps every accepted connection in a conn.
type listener struct {
	net.Listener
	cs *conns
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c, ok := l.cs.add(nc); ok {
			return c, nil
		}
		refusedPerPeer.Inc()
		nc.Close()
	}
}

// conn is an accepted connection. Its frames are watched on the bytes gRPC reads and writes
// (plain), or, under TLS, on those of the connection the handshake returned (tlsConn).
type conn struct {
	net.Conn
	cs     *conns
	addr   string
	peer   netip.Addr
	plain  bool // frames are watched here: no TLS in between
	w      watch
	closed atomic.Bool
	once   sync.Once
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.plain && n > 0 {
		if r, bad := c.w.read(p[:n]); bad {
			c.kill(r)
		}
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	if c.plain {
		c.w.write(p)
	}
	return c.Conn.Write(p)
}

// Close closes the connection and forgets it. Safe for concurrent use, and more than once.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.closed.Store(true)
		c.w.release()
		c.cs.remove(c)
	})
	return err
}

// kill closes the connection for reason, counted once. gRPC's reader then fails, and the
// transport ends every stream of the connection and frees what they held. Safe for concurrent
// use.
func (c *conn) kill(reason int) {
	if c.closed.Swap(true) {
		return
	}
	closedConns[reason].Inc()
	c.Close()
}

// tlsConn is the connection a TLS handshake returned, watched in its clear text.
type tlsConn struct {
	net.Conn
	c *conn
}

func (t *tlsConn) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if n > 0 {
		if r, bad := t.c.w.read(p[:n]); bad {
			t.c.kill(r)
		}
	}
	return n, err
}

func (t *tlsConn) Write(p []byte) (int, error) {
	t.c.w.write(p)
	return t.Conn.Write(p)
}

// watchedCreds moves the frame watch of a conn above its TLS layer.
type watchedCreds struct {
	credentials.TransportCredentials
}

func (w watchedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, ok := raw.(*conn)
	if ok {
		// Before the first byte of the handshake: what crosses raw is not HTTP/2 in clear.
		// The handshake runs on the goroutine that later starts gRPC's reader and writer.
		c.plain = false
	}
	nc, ai, err := w.TransportCredentials.ServerHandshake(raw)
	if err != nil || !ok {
		return nc, ai, err
	}
	return &tlsConn{Conn: nc, c: c}, ai, nil
}

func (w watchedCreds) Clone() credentials.TransportCredentials {
	return watchedCreds{w.TransportCredentials.Clone()}
}
