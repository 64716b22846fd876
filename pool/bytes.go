package pool

import (
	"math/bits"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

const (
	minShift = 10 // smallest tier: 1 KiB
	maxShift = 26 // largest tier: 64 MiB
	numTiers = maxShift - minShift + 1

	// MinSize is the capacity of the smallest tier; every pooled buffer has at least this.
	MinSize = 1 << minShift
	// MaxSize is the capacity of the largest tier. Larger requests are allocated and never
	// pooled.
	MaxSize = 1 << maxShift
)

// tiers[i] holds *[]byte whose capacity is at least 1<<(minShift+i) and below twice that;
// reserves[i] keeps a few of them through collections (reserve), all tiers' reserves together
// at most maxReservedBytes.
var (
	tiers    [numTiers]sync.Pool
	reserves [numTiers]reserve[*[]byte]
)

func init() {
	for i := range reserves {
		reserves[i].init(reserveSlots(minShift + i))
	}
}

var oversizedGets = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_pool_oversized_gets_total",
	Help: "Byte buffer requests above the largest pool tier (64 MiB), served by a plain allocation.",
})

// GetBytes returns an empty buffer (len 0) with capacity of at least size, from the smallest
// tier that fits. A size above MaxSize is allocated and counted in
// otlpgate_pool_oversized_gets_total; PutBytes drops such a buffer. Safe for concurrent use.
func GetBytes(size int) *[]byte {
	if size > MaxSize {
		oversizedGets.Inc()
		b := make([]byte, 0, size)
		return &b
	}
	i := getTier(size)
	if v := tiers[i].Get(); v != nil {
		return v.(*[]byte)
	}
	if b, ok := reserves[i].get(); ok {
		reservedBytes.Add(-int64(cap(*b)))
		return b
	}
	b := make([]byte, 0, 1<<(minShift+i))
	return &b
}

// Cap returns the capacity of the buffer GetBytes(size) returns, for callers that account for
// the memory they hold. Safe for concurrent use.
func Cap(size int) int {
	if size > MaxSize {
		return size
	}
	return 1 << (minShift + getTier(size))
}

// Reserve makes room for n more bytes in the pooled buffer b: when they do not fit, its bytes
// move to a pooled buffer of at least twice its capacity, and the old one goes back to the
// pool, so growing makes no garbage. b keeps its length.
func Reserve(b *[]byte, n int) {
	if len(*b)+n <= cap(*b) {
		return
	}
	nb := GetBytes(max(2*cap(*b), len(*b)+n))
	*nb = append(*nb, *b...)
	*b, *nb = *nb, (*b)[:0]
	PutBytes(nb)
}

// PutBytes returns b to the tier its capacity covers, emptied. Buffers below MinSize or above
// MaxSize, and nil, are dropped. The caller must not touch *b, nor any slice of it, afterwards.
// Safe for concurrent use.
func PutBytes(b *[]byte) {
	if b == nil {
		return
	}
	c := cap(*b)
	if c < MinSize || c > MaxSize {
		return
	}
	*b = (*b)[:0]
	i := putTier(c)
	// Concurrent puts may take the total a few buffers past the bound; it is a bound on what
	// stays, not an exact budget.
	if reservedBytes.Load()+int64(c) <= maxReservedBytes && reserves[i].put(b) {
		reservedBytes.Add(int64(c))
		return
	}
	tiers[i].Put(b)
}

// getTier is the smallest tier whose capacity is at least size (size <= MaxSize).
func getTier(size int) int {
	if size <= MinSize {
		return 0
	}
	return bits.Len(uint(size-1)) - minShift
}

// putTier is the largest tier whose capacity is at most c (MinSize <= c <= MaxSize), so that
// every buffer a tier hands out honours the tier's promise.
func putTier(c int) int {
	return bits.Len(uint(c)) - 1 - minShift
}
