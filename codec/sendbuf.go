package codec

import (
	"google.golang.org/grpc/mem"

	"github.com/otlpgate/otlpgate/pool"
)

// sendBuf carries one marshalled message from Marshal to the moment gRPC frees it. It is the
// mem.BufferPool of the single mem.Buffer it creates, which is how it learns that the transport
// is done: mem calls Put exactly once, when the last reference to that buffer is freed.
//
// It also holds the backing array of the one-element mem.BufferSlice that Marshal returns, so
// that the slice costs no allocation. That is safe because gRPC reads an element of a
// BufferSlice only while it holds a reference to that element's buffer: every range over the
// slice (Free, Len, CopyTo, a Reader) loads the element before freeing it, and no code touches
// a slice whose buffers are all freed. The array is therefore unused by the time Put recycles
// it.
//
// Invariants:
//
//  1. Exactly one of pool and payload is set while in use, unless the bytes belong to the
//     caller (SetBytes), when neither is.
//  2. bufs[0] is the mem.Buffer built over data, or over the pool's buffer.
//  3. After Put, every field is zero and the sendBuf is back in sendBufs.
type sendBuf struct {
	FreeNotice // mem's pool for the buffer: Put below is the notice
	bufs       [1]mem.Buffer
	data       []byte         // the bytes mem's buffer points at, when they are not a pool's *[]byte
	pool       mem.BufferPool // gets the buffer back on Put
	payload    *pool.Payload  // is released on Put
}

// sendBufs keeps sendBufs through collections (a sync.Pool makes them again after each one):
// one per message the transports hold at once.
var sendBufs = pool.NewFreeList[sendBuf](maxFreeSendBufs, nil)

const maxFreeSendBufs = 1024

// sendPooled hands buf, obtained from p, to gRPC; p gets it back when gRPC is done.
func sendPooled(buf *[]byte, p mem.BufferPool) mem.BufferSlice {
	s := sendBufs.Get()
	s.pool = p
	s.bufs[0] = Track(buf, s)
	return s.bufs[:]
}

// sendShared hands b to gRPC without copying. If payload is not nil the caller has taken a
// reference for gRPC, which is released when gRPC is done. cap(b) must be at least MinTracked.
func sendShared(b []byte, payload *pool.Payload) mem.BufferSlice {
	s := sendBufs.Get()
	s.data = b
	s.payload = payload
	s.bufs[0] = Track(&s.data, s)
	return s.bufs[:]
}

// Put is mem's notice that the last reference to the buffer is gone. It runs on whichever
// goroutine freed that reference (usually the transport's writer).
func (s *sendBuf) Put(buf *[]byte) {
	switch {
	case s.payload != nil:
		s.payload.Release()
	case s.pool != nil:
		s.pool.Put(buf)
	}
	*s = sendBuf{}
	sendBufs.Put(s)
}
