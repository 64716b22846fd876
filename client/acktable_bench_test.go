package client

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkAckTable measures insert + acknowledge of one request, the table's work per
// streamed request. Parallel runs SetParallelism × GOMAXPROCS goroutines that insert and answer
// interleaved ids of one sequence, as a destination's lanes do: goroutine g of P takes g, g+P,
// g+2P... (ids come from Enqueue, which is not measured here, so no shared counter skews the
// figures). The baseline is the same work on one map under one mutex.
func BenchmarkAckTable(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		tab := newAckTable(ackShardBits)
		s := &stream{}
		r := &request{stream: s}
		b.ReportAllocs()
		for i := range b.N {
			r.id = uint64(i + 1)
			tab.insert(r)
			if tab.remove(r.id, s) == nil {
				b.Fatal("lost")
			}
		}
	})
	for _, par := range []int{1, 2, 4, 8, 16} {
		b.Run("sharded/goroutines="+strconv.Itoa(par)+"xGOMAXPROCS", func(b *testing.B) {
			tab := newAckTable(ackShardBits)
			var goroutines atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				s := &stream{}
				r := &request{stream: s}
				id, stride := goroutines.Add(1), uint64(par*runtime.GOMAXPROCS(0))
				for pb.Next() {
					r.id = id
					id += stride
					tab.insert(r)
					if tab.remove(r.id, s) == nil {
						panic("lost")
					}
				}
			})
		})
		b.Run("one-mutex-map/goroutines="+strconv.Itoa(par)+"xGOMAXPROCS", func(b *testing.B) {
			var mu sync.Mutex
			m := make(map[uint64]*request, 256)
			var goroutines atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				r := &request{}
				id, stride := goroutines.Add(1), uint64(par*runtime.GOMAXPROCS(0))
				for pb.Next() {
					id += stride
					mu.Lock()
					m[id] = r
					mu.Unlock()
					mu.Lock()
					delete(m, id)
					mu.Unlock()
				}
			})
		})
	}
}
