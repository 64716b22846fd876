package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns a raw Conn and the plain socket at its other end, over loopback TCP.
func pair(t testing.TB) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := Listen(ln).Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := (<-accepted).(*Conn)
	if !ok {
		t.Fatal("Listen's Accept did not return a *Conn")
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

// pattern is n bytes that differ along their length, so that a byte out of place shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestReadWriteBothWays(t *testing.T) {
	c, peer := pair(t)
	// Larger than the socket buffers, so that both ends wait in the poller on EAGAIN.
	want := pattern(8<<20, 3)
	errc := make(chan error, 1)
	go func() {
		_, err := peer.Write(want)
		errc <- err
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from those written")
	}

	back := pattern(8<<20, 11)
	go func() {
		n, err := c.Write(back)
		if err == nil && n != len(back) {
			err = errors.New("short write")
		}
		errc <- err
	}()
	got2 := make([]byte, len(back))
	if _, err := io.ReadFull(peer, got2); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got2, back) {
		t.Fatal("the bytes written arrived different")
	}
}

func TestWriteBuffersInOrder(t *testing.T) {
	c, peer := pair(t)
	// More buffers than one writev takes, of many sizes, some empty, more bytes than the
	// socket buffers hold.
	var bufs net.Buffers
	var want []byte
	for i := range 3000 {
		b := pattern(i%5000, byte(i))
		if i%97 == 0 {
			b = nil
		}
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	errc := make(chan error, 1)
	go func() {
		n, err := WriteBuffers(c, &bufs)
		if err == nil && n != int64(len(want)) {
			err = errors.New("short writev")
		}
		errc <- err
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the buffers arrived different or out of order")
	}
	if len(bufs) != 0 {
		t.Fatalf("%d buffers left unconsumed", len(bufs))
	}
}

func TestEndsAndErrorsAsTheSocket(t *testing.T) {
	c, peer := pair(t)

	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 10))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past its deadline: %v, want a timeout", err)
	}
	c.SetReadDeadline(time.Time{})

	peer.Write([]byte("x"))
	peer.Close()
	b := make([]byte, 10)
	if n, err := c.Read(b); n != 1 || err != nil || b[0] != 'x' {
		t.Fatalf("read %d %q %v, want the byte the peer sent", n, b[:n], err)
	}
	if _, err := c.Read(b); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
	// Writing to a peer that is gone fails soon (EPIPE or ECONNRESET), however it is said.
	var werr error
	for range 100 {
		if _, werr = c.Write(pattern(64<<10, 1)); werr != nil {
			break
		}
	}
	if werr == nil {
		t.Fatal("writes to a closed peer kept succeeding")
	}

	c.Close()
	if _, err := c.Read(b); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Write(b); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
}

func TestCloseWakesABlockedRead(t *testing.T) {
	c, _ := pair(t)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	c.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("blocked read after Close: %v, want net.ErrClosed", err)
	}
}

func TestDisabledLeavesConnectionsAlone(t *testing.T) {
	SetEnabled(false)
	defer SetEnabled(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if Listen(ln) != ln {
		t.Fatal("Listen wrapped while disabled")
	}
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if Wrap(nc) != nc {
		t.Fatal("Wrap wrapped while disabled")
	}
}

func TestUnixSocket(t *testing.T) {
	a, b, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, ok := Wrap(a).(*Conn)
	if !ok {
		t.Fatal("a unix socket was not wrapped")
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "ping" {
		t.Fatalf("read %q %v", got, err)
	}
}

// socketPair is a connected pair of unix stream sockets in a temporary directory.
func socketPair() (net.Conn, net.Conn, error) {
	dir, err := os.MkdirTemp("", "rawio")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", dir+"/s")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	a, err := net.Dial("unix", dir+"/s")
	if err != nil {
		return nil, nil, err
	}
	b, err := ln.Accept()
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

// TestReadPooledHoldsNoBufferWhileWaiting: ReadPooled takes a buffer only for bytes that are
// there, gives it back before it waits, returns it with the bytes, and returns none at the
// peer's end or past a deadline.
func TestReadPooledHoldsNoBufferWhileWaiting(t *testing.T) {
	c, peer := pair(t)
	var out, gets atomic.Int64
	get := func() *[]byte {
		out.Add(1)
		gets.Add(1)
		b := make([]byte, 64)
		return &b
	}
	put := func(*[]byte) { out.Add(-1) }
	type result struct {
		b   *[]byte
		n   int
		err error
	}
	res := make(chan result, 1)
	go func() {
		b, n, err := c.ReadPooled(get, put)
		res <- result{b, n, err}
	}()
	// The read waits for the peer, holding no buffer.
	time.Sleep(50 * time.Millisecond)
	if n := out.Load(); n != 0 {
		t.Fatalf("%d buffers held while the read waits", n)
	}
	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || r.n != 5 || string((*r.b)[:r.n]) != "hello" || out.Load() != 1 {
		t.Fatalf("read %d bytes, %v, %d buffers out", r.n, r.err, out.Load())
	}
	if gets.Load() < 2 {
		t.Fatalf("%d buffers taken: the one of the first try was kept through the wait", gets.Load())
	}
	put(r.b)

	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if b, n, err := c.ReadPooled(get, put); b != nil || n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) || out.Load() != 0 {
		t.Fatalf("past the deadline: %v, %d, %v, %d buffers out", b, n, err, out.Load())
	}
	c.SetReadDeadline(time.Time{})
	peer.Close()
	if b, n, err := c.ReadPooled(get, put); b != nil || n != 0 || err != io.EOF || out.Load() != 0 {
		t.Fatalf("at the peer's end: %v, %d, %v, %d buffers out", b, n, err, out.Load())
	}
}
