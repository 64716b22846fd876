package bench

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet's worker pool (ants), linked in by the gateway's UDS intake, starts its cleaners
		// when the package initialises.
		goleak.IgnoreCurrent(),
		// fasthttp's process-wide helpers, started once and never stopped: the Date header
		// refresher, the default dialer's address-cache cleaner, and the HTTP load client's
		// idle-connection cleaner (ends a while after its last connection closed).
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

// echo serves a TCP echo on loopback.
func echo(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(c, c); c.Close() }()
		}
	}()
	return ln
}

// Every byte comes back, in order, through both delayed directions, with 50 writes in flight at
// once. (How long they take is for the benchmarks to show, not for a test to assert.)
func TestDelayLineCarriesBytes(t *testing.T) {
	for _, oneWay := range []time.Duration{0, 2 * time.Millisecond} {
		srv := echo(t)
		d, err := NewDelayLine("127.0.0.1:0", srv.Addr().String(), oneWay)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", d.Addr())
		if err != nil {
			t.Fatal(err)
		}
		var sent bytes.Buffer
		for i := range 50 {
			b := bytes.Repeat([]byte{byte(i)}, 1000+i)
			sent.Write(b)
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]byte, sent.Len())
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, sent.Bytes()) {
			t.Fatalf("delay %v: bytes changed in transit", oneWay)
		}
		c.Close()
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
