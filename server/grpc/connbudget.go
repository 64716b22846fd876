package grpcserver

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/otlpgate/otlpgate/internal/admission"
)

// Connection accounts and the progress deadline.
//
// A call reserves its largest message before gRPC lets the message in (intake.go), so a call
// that sends HEADERS and then nothing would hold that reservation for as long as its
// connection lives. Two bounds keep such calls from locking the other clients out:
//
//  1. Every connection has a admission.Account: its calls hold at most -intake.max-conn-bytes
//     together, whatever their number. The calls find the account through their peer address,
//     which is the connection's own (connAddr), so that no lookup or allocation is needed per
//     call; with TLS, the TLS connection reports the address of the connection it wraps.
//  2. Every reservation has a progress deadline: the sweep closes a connection one of whose
//     reservations is older than -intake.progress-timeout while the connection received less
//     than admission.ProgressBytes in that time. Its calls end, and their reservations return.
//     Calls that complete, however many, do not keep an old one alive; a client that keeps
//     sending, however slowly a large message arrives, is not cut.
//
// The sweep runs on a goroutine of its own, sweepTicks times per timeout; it reads the bytes
// read (an atomic) and the ages of the reservations (Account.Tick).

// budgetListener wraps the connections it accepts in budgetConns.
type budgetListener struct {
	net.Listener
	s *Server
}

func (l budgetListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	bc := &budgetConn{Conn: c, acct: l.s.adm.Limiter().NewAccount(admission.IntakeGRPC), s: l.s}
	bc.addr = connAddr{Addr: c.RemoteAddr(), c: bc}
	l.s.budgetConns.add(bc)
	return bc, nil
}

// budgetConn is an accepted connection with its account and the bytes read from it.
type budgetConn struct {
	net.Conn
	acct *admission.Account
	addr connAddr
	s    *Server
	read atomic.Int64
	once sync.Once
	// reads are the byte counts at the sweep's last sweepTicks+1 ticks, by tick; sweep
	// goroutine only.
	reads [sweepTicks + 1]int64
	ticks uint64
}

// sweepTicks is how many sweeps fit in -intake.progress-timeout: a reservation is found past
// its deadline at most a quarter of the timeout late.
const sweepTicks = 4

func (c *budgetConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// RemoteAddr returns the peer's address, through which the calls find the account.
func (c *budgetConn) RemoteAddr() net.Addr { return &c.addr }

func (c *budgetConn) Close() error {
	c.once.Do(func() { c.s.budgetConns.remove(c) })
	return c.Conn.Close()
}

// connAddr is the peer address of a budgetConn: the real address, and the connection.
type connAddr struct {
	net.Addr
	c *budgetConn
}

// accountOf returns the account of the connection a call arrived on, nil when it has none
// (no intake limiter).
func accountOf(p *peer.Peer) *admission.Account {
	if a, ok := p.Addr.(*connAddr); ok {
		return a.c.acct
	}
	return nil
}

// connSet is the set of open budgetConns, for the sweep.
type connSet struct {
	mu    sync.Mutex
	conns map[*budgetConn]struct{}
	wake  sweepWake // signalled by add: the sweep sleeps while the set is empty
}

func (s *connSet) add(c *budgetConn) {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[*budgetConn]struct{}{}
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.wake.signal()
}

func (s *connSet) remove(c *budgetConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// snapshot appends the open connections to dst.
func (s *connSet) snapshot(dst []*budgetConn) []*budgetConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		dst = append(dst, c)
	}
	return dst
}

// sweepProgress runs the progress deadline (see above) every timeout/sweepTicks until stop
// closes, sleeping while no connection is open (sweepWake). It runs on its own goroutine.
func (s *Server) sweepProgress(timeout time.Duration, stop <-chan struct{}) {
	period := max(timeout/sweepTicks, time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	var conns []*budgetConn
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			conns = s.budgetConns.snapshot(conns[:0])
			if len(conns) == 0 {
				if !s.budgetConns.wake.sleep(t, period, stop) {
					return
				}
				continue
			}
			for _, c := range conns {
				s.checkProgress(c, timeout)
			}
			clear(conns)
		}
	}
}

// checkProgress closes c when one of its reservations is older than the timeout (sweepTicks
// ticks, a full tick more since it was taken within one) and it received less than
// ProgressBytes over those ticks. Sweep goroutine only.
func (s *Server) checkProgress(c *budgetConn, timeout time.Duration) {
	age := c.acct.Tick()
	c.ticks++
	read := c.read.Load()
	c.reads[c.ticks%(sweepTicks+1)] = read
	if age <= sweepTicks || c.ticks <= sweepTicks {
		return
	}
	got := read - c.reads[(c.ticks-sweepTicks)%(sweepTicks+1)]
	if got >= admission.ProgressBytes {
		return
	}
	s.adm.Limiter().CountStalled(admission.IntakeGRPC)
	s.log.Debug("grpc: connection closed: a call held intake bytes past -intake.progress-timeout while it sent too little",
		"peer", c.addr.String(), "held", c.acct.Held(), "received", got, "timeout", timeout)
	c.Close()
}
