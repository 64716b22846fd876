//go:build !race

package rawio

import (
	"io"
	"net"
	"testing"
)

// TestNoAllocations: a read, a pooled read, a write and a vectored write of a wrapped socket
// allocate nothing once the connection is open.
func TestNoAllocations(t *testing.T) {
	c, peer := pair(t)
	msg := pattern(1000, 5)
	in := make([]byte, len(msg))
	vec := [][]byte{msg[:10], msg[10:600], msg[600:]}
	// WriteBuffers consumes bufs as net.Buffers.WriteTo does: refill it from one backing array.
	backing := make(net.Buffers, 0, len(vec))
	bufs := append(backing, vec...)
	if _, err := c.WriteBuffers(&bufs); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(peer, in); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(msg))
	spare := make([]byte, 64)
	free := &spare
	get := func() *[]byte { b := free; free = nil; return b }
	put := func(b *[]byte) { free = b }
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, in); err != nil {
			t.Fatal(err)
		}
		bufs = append(backing[:0], vec...)
		if _, err := c.WriteBuffers(&bufs); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, in); err != nil {
			t.Fatal(err)
		}
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			t.Fatal(err)
		}
		// ReadPooled, its buffer from a pool of one: a wait in the poller and the buffer's
		// round trip through get and put allocate nothing either.
		if _, err := peer.Write(msg[:7]); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 7; {
			pb, n, err := c.ReadPooled(get, put)
			if err != nil {
				t.Fatal(err)
			}
			got += n
			put(pb)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per read, write and writev, want 0", allocs)
	}
}

func BenchmarkReadWrite(b *testing.B) {
	c, peer := pair(b)
	msg := pattern(4096, 1)
	in := make([]byte, len(msg))
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		c.Write(msg)
		io.ReadFull(peer, in)
	}
}
