//go:build !race && !invariants

package pool

import (
	"runtime"
	"testing"
)

// Checked builds poison released payloads instead of pooling them, and the race detector makes
// sync.Pool drop items at random, so the allocation proofs run only in plain builds.

func TestGetPutBytesAllocs(t *testing.T) {
	for _, size := range []int{0, 1 << 10, 5000, 1 << 20, MaxSize} {
		PutBytes(GetBytes(size)) // warm the tier
		got := testing.AllocsPerRun(1000, func() {
			b := GetBytes(size)
			*b = append(*b, 1, 2, 3)
			PutBytes(b)
		})
		if got != 0 {
			t.Errorf("GetBytes(%d)+PutBytes: %v allocs/op, want 0", size, got)
		}
	}
}

func TestPayloadCycleAllocs(t *testing.T) {
	body := make([]byte, 3000)
	NewPayload(len(body)).Release() // warm
	got := testing.AllocsPerRun(1000, func() {
		p := NewPayload(len(body))
		b := p.Buf()
		*b = append(*b, body...)
		q := p.Retain()
		r := p.Retain()
		p.Release()
		q.Release()
		r.Release()
	})
	if got != 0 {
		t.Fatalf("NewPayload+append+Retain+Release: %v allocs/op, want 0", got)
	}
}

// Buffers and a payload recycled before two collections are still there after them: the
// reserve keeps them where sync.Pool alone would have dropped them, so GetBytes and NewPayload
// hand out the same ones instead of making new ones. (sync.Pool remakes its per-P arrays after
// a collection, so counting allocations here would count those too.)
func TestReserveSurvivesCollections(t *testing.T) {
	const size = 48 << 10
	mine := map[*[]byte]bool{}
	var bufs [8]*[]byte
	for i := range bufs {
		bufs[i] = GetBytes(size)
		mine[bufs[i]] = true
	}
	p := NewPayload(size) // while the eight are held: its buffer is a ninth
	mine[p.Buf()] = true
	for _, b := range bufs {
		PutBytes(b)
	}
	p.Release()
	for round := range 3 {
		runtime.GC()
		runtime.GC()
		for i := range bufs {
			bufs[i] = GetBytes(size)
			if !mine[bufs[i]] {
				t.Fatalf("round %d: buffer %d is a new one", round, i)
			}
		}
		q := NewPayload(size)
		if q != p || !mine[q.Buf()] {
			t.Fatalf("round %d: NewPayload made a new payload (%v) or buffer (%v)", round, q != p, !mine[q.Buf()])
		}
		q.Release()
		for _, b := range bufs {
			PutBytes(b)
		}
	}
}

// Get and Put allocate nothing, collections between them included: the list is not a
// sync.Pool, whose items (and per-P arrays) a collection takes away.
func TestFreeListAllocs(t *testing.T) {
	l := NewFreeList[[128]byte](4, nil)
	l.Put(l.Get())
	got := testing.AllocsPerRun(100, func() {
		runtime.GC()
		runtime.GC()
		l.Put(l.Get())
	})
	if got != 0 {
		t.Fatalf("FreeList Get+Put across collections: %v allocs/op, want 0", got)
	}
}

// Batch buffers of large batches, tens of them in flight at once, are kept through collections
// too: a reserve of a few buffers for these tiers let every collection cost the rest.
func TestReserveKeepsBatchBuffers(t *testing.T) {
	// Tiers no other test uses, so that their reserves start empty.
	for _, tc := range []struct{ size, n int }{{200 << 10, 32}, {100 << 10, 64}} {
		size := tc.size
		bufs := make([]*[]byte, tc.n)
		mine := map[*[]byte]bool{}
		for i := range bufs {
			bufs[i] = GetBytes(size)
			mine[bufs[i]] = true
		}
		for round := range 3 {
			for _, b := range bufs {
				PutBytes(b)
			}
			runtime.GC()
			runtime.GC()
			for i := range bufs {
				if bufs[i] = GetBytes(size); !mine[bufs[i]] {
					t.Fatalf("size %d, round %d: buffer %d of %d is a new one", size, round, i, len(bufs))
				}
			}
		}
		for _, b := range bufs {
			PutBytes(b)
		}
	}
}
