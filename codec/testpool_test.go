package codec

import (
	"sync"
	"sync/atomic"
)

// countingPool is a mem.BufferPool that allocates every buffer and records what comes back, so
// tests can see exactly when the codec or gRPC gives a buffer up.
type countingPool struct {
	gets, puts atomic.Int32
	mu         sync.Mutex
	returned   []*[]byte
}

func (p *countingPool) Get(n int) *[]byte {
	p.gets.Add(1)
	b := make([]byte, n)
	return &b
}

func (p *countingPool) Put(b *[]byte) {
	p.puts.Add(1)
	p.mu.Lock()
	p.returned = append(p.returned, b)
	p.mu.Unlock()
}
