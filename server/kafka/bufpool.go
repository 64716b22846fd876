package kafka

import "sync"

// Buffers for requests, decompressed payloads and encoded bodies, in two size classes so that
// the many small requests (ApiVersions, GetTelemetrySubscriptions) do not churn the buffers
// sized for pushes.
var (
	smallBufs sync.Pool // *[]byte, cap <= smallBufSize
	largeBufs sync.Pool // *[]byte, smallBufSize < cap <= maxPooledBuf
)

const (
	smallBufSize = 16 << 10
	// maxPooledBuf drops buffers above it rather than keep them alive in the pool.
	maxPooledBuf = 16 << 20
)

// getBuf returns an empty buffer with room for n bytes. Return it with putBuf.
func getBuf(n int) *[]byte {
	pool := &largeBufs
	if n <= smallBufSize {
		pool = &smallBufs
	}
	p, _ := pool.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	if cap(*p) < n {
		size := smallBufSize
		for size < n {
			size *= 2
		}
		*p = make([]byte, 0, size)
	}
	*p = (*p)[:0]
	return p
}

// putBuf recycles a buffer from getBuf (which may have grown since); the caller must not use it
// afterwards.
func putBuf(p *[]byte) {
	switch c := cap(*p); {
	case c > maxPooledBuf:
	case c > smallBufSize:
		*p = (*p)[:0]
		largeBufs.Put(p)
	default:
		*p = (*p)[:0]
		smallBufs.Put(p)
	}
}
