package codec

import "google.golang.org/grpc/mem"

// A buffer handed to gRPC is "tracked" when the sender learns the moment gRPC's transport is
// done with it: the sender builds the mem.Buffer with itself as its mem.BufferPool, and mem
// calls the pool's Put exactly once, when the last reference (the buffer's or any Slice of it)
// is freed. The codec's sendBuf and the client's OTEP frame both send this way; Track and
// FreeNotice are the one implementation of the trick.

// MinTracked is the smallest capacity gRPC's mem.NewBuffer counts references for. At or below
// 1 KiB (mem's pooling threshold) it returns an untracked mem.SliceBuffer whose Free never
// reaches a pool, so a pooled buffer or a payload reference handed over that way would never
// come back. A message smaller than that is sent from a pooled buffer of this capacity.
const MinTracked = 1<<10 + 1

// FreeNotice is embedded by a type that passes itself to Track: it supplies the Get half of
// mem.BufferPool, which mem never calls on a buffer's pool (it only gives bytes back), and the
// embedding type supplies Put, its notice that gRPC freed the buffer.
type FreeNotice struct{}

// Get is never called: mem uses the pool of a Buffer only to give its bytes back.
func (FreeNotice) Get(int) *[]byte {
	panic("BUG: codec: a tracked buffer's pool is not a source of buffers")
}

// Track returns a mem.Buffer over *buf holding one reference; owner.Put(buf) runs once, on
// whichever goroutine frees the last reference to it or to a Slice of it. cap(*buf) must be at
// least MinTracked, or gRPC would never tell: Track panics then. Safe for concurrent use; the
// caller must keep *buf and its bytes unchanged until Put.
func Track(buf *[]byte, owner mem.BufferPool) mem.Buffer {
	if cap(*buf) < MinTracked {
		panic("BUG: codec: a buffer of at most 1 KiB cannot be tracked")
	}
	return mem.NewBuffer(buf, owner)
}
