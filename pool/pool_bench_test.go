package pool

import (
	"strconv"
	"testing"
)

func BenchmarkGetPutBytes(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 4 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					buf := GetBytes(size)
					*buf = (*buf)[:size]
					PutBytes(buf)
				}
			})
		})
	}
}

// BenchmarkPayloadFanOut is the life of one batch: built once, shared with three destinations,
// released by each.
func BenchmarkPayloadFanOut(b *testing.B) {
	body := make([]byte, 64<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p := NewPayload(len(body))
			*p.Buf() = append(*p.Buf(), body...)
			d1, d2, d3 := p.Retain(), p.Retain(), p.Retain()
			p.Release()
			d1.Release()
			d2.Release()
			d3.Release()
		}
	})
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
