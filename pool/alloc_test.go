//go:build !race && !invariants

package pool

import "testing"

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
