package uds

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/rawio"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// TestNetEngineIdleConnectionsHoldNoBuffers: with -uds.engine=net and raw reads (the
// default), connections that wait for their clients hold no read buffer, before their first
// message and after it, and every message still arrives.
func TestNetEngineIdleConnectionsHoldNoBuffers(t *testing.T) {
	if !rawio.Enabled() {
		t.Skip("raw system calls are off: a connection keeps its buffer")
	}
	h := start(t, func(c *Config) { c.Engine = EngineNet })
	const n = 20
	conns := make([]*net.UnixConn, n)
	for i := range conns {
		conns[i] = h.dial()
		defer conns[i].Close()
	}
	testkit.WaitFor(t, "every connection accepted", func() bool { return h.s.conns.Load() == n })
	e := h.s.mu.net
	// A connection's first read takes a buffer, finds nothing and gives it back before it
	// waits: a connection just accepted may be in that moment. Once all of them wait, none
	// holds a buffer, and none takes one while nothing arrives.
	testkit.WaitFor(t, "the idle connections to hold no buffer", func() bool { return e.buffers.Load() == 0 })
	time.Sleep(50 * time.Millisecond)
	if b := e.buffers.Load(); b != 0 {
		t.Fatalf("%d read buffers held by %d idle connections", b, n)
	}
	for i, c := range conns {
		write(t, c, newStream(uint64(100+i)).init().spans("s").buf, 0)
	}
	testkit.WaitFor(t, "a span from every connection", func() bool { return len(spanNames(t, h.rec.Received())) == n })
	testkit.WaitFor(t, "the buffers back", func() bool { return e.buffers.Load() == 0 })
	names := spanNames(t, h.rec.Received())
	for i := range n {
		if got := names[int64(100+i)]; !slices.Equal(got, []string{"s"}) {
			t.Fatalf("process %d: spans %v", 100+i, got)
		}
	}
}
