package bench

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Relay is the floor of the anchor benchmark (RunAnchor): a TCP relay that copies the bytes of
// each connection to the target and the answers back without looking at them. What it costs
// per byte is what the kernel costs any proxy to move those bytes through one process over
// loopback TCP; on Linux io.Copy from one TCP connection to another is served by splice(2), so
// not even a copy into the process is counted. A proxy that reads requests, checks them and
// sends them on can approach this cost, not go below it.
//
// With a buffer (StartRelay's buf > 0) the relay reads each direction into a buffer of its own
// and writes it out, as any proxy that looks at the bytes must: one copy into the process and
// one out of it, per byte. That is the floor of a proxy that reads its requests (the anchor's
// tcp-relay-copy row); the splice relay is the floor of one that does not.
//
// Each connection runs two goroutines, one per direction; Close ends them all.
type Relay struct {
	ln     net.Listener
	target string
	buf    int
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		conns  map[net.Conn]struct{}
		closed bool
	}
}

// StartRelay listens on listen and relays every connection to target: with splice(2) when buf
// is 0, else through a buffer of buf bytes per direction.
func StartRelay(listen, target string, buf int) (*Relay, error) {
	if buf < 0 {
		return nil, errors.New("relay: negative buffer size")
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, target: target, buf: buf}
	r.mu.conns = make(map[net.Conn]struct{})
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the address the relay listens on.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Close stops accepting, closes every relayed connection and waits for their goroutines.
func (r *Relay) Close() {
	r.ln.Close()
	r.mu.Lock()
	r.mu.closed = true
	for c := range r.mu.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		r.wg.Add(1)
		go r.relay(in)
	}
}

// track registers c for Close; false once Close has run, and c is then closed here.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		c.Close()
		return false
	}
	r.mu.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.mu.conns, c)
	r.mu.Unlock()
	c.Close()
}

// relay copies in to a new connection to the target and back. A side that ends its sending
// half-closes the other side's, as a client that finished its requests would; the connection
// pair ends when both directions have.
func (r *Relay) relay(in net.Conn) {
	defer r.wg.Done()
	if !r.track(in) {
		return
	}
	defer r.untrack(in)
	out, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	if !r.track(out) {
		return
	}
	defer r.untrack(out)
	done := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(done)
		r.copyHalf(in, out)
	}()
	r.copyHalf(out, in)
	<-done
}

// copyHalf copies src to dst until src ends, then closes dst for writing (or whole, when it
// cannot be half-closed) so that the far side sees the end.
func (r *Relay) copyHalf(dst, src net.Conn) {
	var err error
	if r.buf == 0 {
		_, err = io.Copy(dst, src)
	} else {
		// Wrapped so that io.CopyBuffer finds neither ReadFrom nor WriteTo, which would splice.
		_, err = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, r.buf))
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		cw.CloseWrite()
		return
	}
	dst.Close()
	src.Close()
}
