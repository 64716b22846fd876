package pool

import (
	"sync"
	"sync/atomic"
)

// reserve keeps a few items of a pool out of the collector's reach. A sync.Pool drops whatever
// sat unused through two collections, and a busy proxy collects every few milliseconds (gRPC's
// own garbage sees to that), so after a lull, or at a peak a little above the last one, the pool
// is short and Get allocates. The reserve holds up to len(items) items for good: PutBytes
// fills it first while it has room (one atomic load when it is full, the steady state), and
// GetBytes takes from it only when the pool is empty.
type reserve[T any] struct {
	n     atomic.Int32 // items held, read without the lock to skip a full reserve
	mu    sync.Mutex
	items []T // a fixed number of slots, made once
	held  int
}

func (r *reserve[T]) init(slots int) { r.items = make([]T, slots) }

// put keeps v when there is room and reports whether it did.
func (r *reserve[T]) put(v T) bool {
	if int(r.n.Load()) >= len(r.items) {
		return false
	}
	r.mu.Lock()
	ok := r.held < len(r.items)
	if ok {
		r.items[r.held] = v
		r.held++
		r.n.Store(int32(r.held))
	}
	r.mu.Unlock()
	return ok
}

// get takes an item, if the reserve holds one.
func (r *reserve[T]) get() (v T, ok bool) {
	if r.n.Load() == 0 {
		return v, false
	}
	r.mu.Lock()
	if r.held > 0 {
		r.held--
		v, r.items[r.held] = r.items[r.held], v
		r.n.Store(int32(r.held))
		ok = true
	}
	r.mu.Unlock()
	return v, ok
}

// reserveBytesPerTier bounds the bytes a tier's reserve keeps up to the 256 KiB tier,
// reserveBytesLarge above, and maxReserveSlots its count: 512 buffers up to the 32 KiB tier,
// fewer above (64 of 256 KiB), 4 of 512 KiB, 2 of 1 MiB, one of 2 MiB, none of the larger tiers
// (whose buffers only the largest batches and requests take, and which a burst of them would
// otherwise leave pinned). Requests' bodies, gRPC's 16 KiB frames (240 at once in flight with
// large requests at 8 in flight) and batches' buffers are in memory until their batch is
// forwarded, so with an upstream a little behind, tens to hundreds of each are in use at once,
// and a reserve that holds fewer lets every collection cost the difference. maxReservedBytes
// bounds all tiers together; they keep only what was once in use.
const (
	reserveBytesPerTier = 16 << 20
	reserveBytesLarge   = 2 << 20
	largeReserveShift   = 18 // tiers above 1<<largeReserveShift bytes keep reserveBytesLarge
	maxReserveSlots     = 512
	maxReservedBytes    = 64 << 20
)

// reservedBytes is the capacity the byte tiers' reserves hold, against maxReservedBytes.
var reservedBytes atomic.Int64

// reserveSlots is the reserve of the tier whose buffers have 1<<shift bytes.
func reserveSlots(shift int) int {
	if shift > largeReserveShift {
		return reserveBytesLarge >> shift
	}
	return min(reserveBytesPerTier>>shift, maxReserveSlots)
}
