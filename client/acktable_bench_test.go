package client

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkAckTable measures insert + acknowledge of one request, the table's work per
// streamed request. Parallel runs SetParallelism × GOMAXPROCS goroutines that insert and answer
// their own ids drawn from one destination sequence, as lanes and receivers do; the baseline
// is the same work on one map under one mutex.
func BenchmarkAckTable(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		tab := newAckTable(ackShardBits, 256)
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
			tab := newAckTable(ackShardBits, 256)
			var ids atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				s := &stream{}
				r := &request{stream: s}
				for pb.Next() {
					r.id = ids.Add(1)
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
			var ids atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				r := &request{}
				for pb.Next() {
					id := ids.Add(1)
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
