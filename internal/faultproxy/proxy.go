package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is the fault in force.
type Mode int32

const (
	// Pass forwards bytes (after Delay, if set).
	Pass Mode = iota
	// BlackHole reads and discards bytes in both directions; connections stay open and new ones
	// are accepted, as behind a dead middlebox.
	BlackHole
	// Refuse closes new connections at once; existing ones keep passing.
	Refuse
)

// Proxy forwards connections from Addr to a target.
type Proxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	delay  atomic.Int64 // one-way, nanoseconds

	mu    sync.Mutex
	conns map[*pair]struct{}
	wg    sync.WaitGroup

	accepted atomic.Int64
}

type pair struct {
	client, server net.Conn
	done           atomic.Int32 // directions finished; the second one closes both sockets
}

// New listens on 127.0.0.1:0 and forwards to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget changes where new connections go (a restarted server on another port).
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// SetMode switches the fault for every connection, existing and new.
func (p *Proxy) SetMode(m Mode) { p.mode.Store(int32(m)) }

// SetDelay delays every chunk by d in each direction (0: none). Chunks are delayed in order.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Accepted is how many connections the proxy has taken so far.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Cut closes every open connection gracefully (FIN).
func (p *Proxy) Cut() { p.closeAll(false) }

// Reset aborts every open connection (RST).
func (p *Proxy) Reset() { p.closeAll(true) }

func (p *Proxy) closeAll(rst bool) {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*pair]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		for _, x := range []net.Conn{c.client, c.server} {
			if tc, ok := x.(*net.TCPConn); ok && rst {
				tc.SetLinger(0)
			}
			x.Close()
		}
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		if Mode(p.mode.Load()) == Refuse {
			c.Close()
			continue
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		if p.conns == nil {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(s, c, pr)
		go p.pump(c, s, pr)
	}
}

// pump copies src to dst, applying the mode and delay in force when each chunk is read. An EOF
// from src is passed on as a half-close, so that the other direction can still finish.
func (p *Proxy) pump(dst, src net.Conn, pr *pair) {
	defer p.wg.Done()
	defer func() {
		if pr.done.Add(1) < 2 {
			return
		}
		pr.client.Close()
		pr.server.Close()
		p.mu.Lock()
		delete(p.conns, pr)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && Mode(p.mode.Load()) != BlackHole {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close() // the other direction is dead: stop this one too
				return
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				tc.CloseWrite()
				return
			}
			dst.Close() // a reset or local close: abort the other direction
			return
		}
	}
}

// Close stops accepting, closes every connection and waits for the copying goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.client.Close()
		c.server.Close()
	}
	p.wg.Wait()
	return err
}
