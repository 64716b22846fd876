package spool

import (
	"fmt"
	"testing"
)

// BenchmarkAppend appends 1 KiB records on the real file system, per sync mode, from 1 and from
// 64 goroutines per GOMAXPROCS (group commit shows in the latter).
func BenchmarkAppend(b *testing.B) {
	p := make([]byte, 1024)
	for _, mode := range []SyncMode{SyncNone, SyncInterval, SyncAlways} {
		for _, par := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/par=%d", mode, par), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.Dir = b.TempDir()
				cfg.Sync = mode
				cfg.MaxBytes = 64 << 30
				s, err := Open(cfg, OSFS{}, []string{"a"})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				b.ReportAllocs()
				b.SetBytes(int64(len(p)))
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := s.Append(Record{Items: 1, Payload: p}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
