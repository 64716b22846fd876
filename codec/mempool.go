package codec

import (
	"google.golang.org/grpc/mem"

	"github.com/otlpgate/otlpgate/pool"
)

// MemPool serves grpc's mem.BufferPool from pool/'s tiers (1 KiB to 16 MiB). Unlike
// mem.DefaultBufferPool it does not zero a buffer before handing it out, like grpc's own "dirty"
// pools: the codec writes every byte it hands to gRPC, and gRPC's transport and mem.ReadAll read
// only what they wrote. Its tiers also reach 16 MiB where the default pool's stop at 1 MiB, so
// large batches are pooled too. The zero value is ready; it is safe for concurrent use.
type MemPool struct{}

var _ mem.BufferPool = MemPool{}

// Get returns a buffer of length n, with whatever bytes its last user left in it. Safe for
// concurrent use.
func (MemPool) Get(n int) *[]byte {
	b := pool.GetBytes(n)
	*b = (*b)[:n]
	return b
}

// Put returns b to its tier. Safe for concurrent use.
func (MemPool) Put(b *[]byte) { pool.PutBytes(b) }
