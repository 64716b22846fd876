package bench

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// DelayLine is a TCP proxy on loopback that holds every byte for a fixed one-way delay in each
// direction, so that a client talking to Addr() sees a round trip of twice the delay more than
// it would talking to the target directly.
//
// Bytes are delayed, not serialised: each chunk read at time t is written at t+delay regardless
// of the chunks before it, so a pipelined stream keeps as many bytes in flight as it sends, as on
// a long network path. Chunks of one direction stay in order (the TCP contract). A delay under
// 50µs is not injected at all (timers are not that precise): the proxy then only adds its own
// hop, which is how the appendix's 0.02 ms loopback row is reproduced.
//
// Run it in another process than the one being measured (otlpbench does), so that its copies do
// not count as the measured process's CPU time.
type DelayLine struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// minDelay is the shortest delay the line injects.
const minDelay = 50 * time.Microsecond

// NewDelayLine listens on listen (e.g. 127.0.0.1:0) and forwards to target with oneWay delay in
// each direction.
func NewDelayLine(listen, target string, oneWay time.Duration) (*DelayLine, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	d := &DelayLine{ln: ln, target: target, delay: oneWay, conns: map[net.Conn]struct{}{}}
	d.wg.Add(1)
	go d.accept()
	return d, nil
}

// Addr is where clients connect.
func (d *DelayLine) Addr() string { return d.ln.Addr().String() }

func (d *DelayLine) track(c net.Conn, add bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if add {
		if d.conns == nil {
			return false
		}
		d.conns[c] = struct{}{}
	} else if d.conns != nil {
		delete(d.conns, c)
	}
	return true
}

func (d *DelayLine) accept() {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", d.target)
		if err != nil {
			c.Close()
			continue
		}
		if !d.track(c, true) || !d.track(up, true) {
			c.Close()
			up.Close()
			return
		}
		d.wg.Add(2)
		go d.pump(up, c)
		go d.pump(c, up)
	}
}

// chunk is a run of bytes and the time it may leave.
type chunk struct {
	at time.Time
	b  []byte
}

// pump copies src to dst, each chunk delayed. A reader goroutine stamps chunks as they arrive;
// this goroutine writes each at its time. The queue between them is bounded (it stands for the
// bytes in flight on the path): a reader that fills it waits, as a sender whose window is full.
func (d *DelayLine) pump(dst, src net.Conn) {
	defer d.wg.Done()
	defer func() {
		d.track(dst, false)
		dst.Close()
	}()
	if d.delay < minDelay {
		io.Copy(dst, src)
		return
	}
	q := make(chan chunk, 4096)
	free := make(chan []byte, 4096)
	go func() {
		defer close(q)
		for {
			var b []byte
			select {
			case b = <-free:
			default:
				b = make([]byte, 64<<10)
			}
			n, err := src.Read(b[:cap(b)])
			if n > 0 {
				q <- chunk{at: time.Now().Add(d.delay), b: b[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		if w := time.Until(c.at); w > 0 {
			time.Sleep(w)
		}
		if _, err := dst.Write(c.b); err != nil {
			src.Close()
			for range q { // let the reader finish
			}
			return
		}
		select {
		case free <- c.b:
		default:
		}
	}
}

// Close stops accepting, closes every connection and waits for the pumps.
func (d *DelayLine) Close() error {
	err := d.ln.Close()
	d.mu.Lock()
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	d.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
