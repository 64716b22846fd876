package faultproxy

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg []byte) ([]byte, error) {
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.ReadFull(c, got)
	return got, err
}

func TestFaults(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, []byte("hello")); err != nil || !bytes.Equal(got, []byte("hello")) {
		t.Fatalf("pass: %q, %v", got, err)
	}
	p.SetDelay(time.Millisecond)
	if got, err := roundTrip(c, []byte("slow")); err != nil || string(got) != "slow" {
		t.Fatalf("delay: %q, %v", got, err)
	}
	p.SetDelay(0)

	// Black hole: the bytes vanish, the connection stays open.
	p.SetMode(BlackHole)
	c.Write([]byte("lost"))
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := c.Read(make([]byte, 8)); n != 0 || !isTimeout(err) {
		t.Fatalf("black hole answered: %d, %v", n, err)
	}
	p.SetMode(Pass)
	if got, err := roundTrip(c, []byte("back")); err != nil || string(got) != "back" {
		t.Fatalf("after black hole: %q, %v", got, err)
	}

	// Reset: the client sees the connection die.
	p.Reset()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after reset succeeded")
	}

	// Refuse: new connections are closed at once.
	p.SetMode(Refuse)
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Fatal("refused connection delivered data")
	}
	c2.Close()

	// Cut: a FIN reaches the client.
	p.SetMode(Pass)
	c3, _ := net.Dial("tcp", p.Addr())
	defer c3.Close()
	if _, err := roundTrip(c3, []byte("x")); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	c3.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c3.Read(make([]byte, 1)); err != io.EOF && err == nil {
		t.Fatalf("after cut: %v", err)
	}
	if n := p.Accepted(); n != 3 {
		t.Fatalf("accepted %d connections, want 3", n)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
