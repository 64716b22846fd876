//go:build !race

package admission

import (
	"testing"
	"time"
)

// sync.Pool drops items at random under the race detector, so the proof runs in plain builds.
func TestLimiterZeroAlloc(t *testing.T) {
	l := NewLimiter(LimiterConfig{MaxBytes: 1 << 20, MaxDecodes: 1, Wait: time.Microsecond})
	if got := testing.AllocsPerRun(1000, func() {
		if !l.AcquireBytes(IntakeGRPC, 4096, nil) || !l.AcquireDecode(IntakeGRPC, nil) {
			t.Fatal("refused with nothing held")
		}
		l.ReleaseDecode()
		l.ReleaseBytes(IntakeGRPC, 4096)
	}); got != 0 {
		t.Errorf("acquire+release: %v allocs/op, want 0", got)
	}
	// The waiting path: a pooled waiter and its timer, refused when the wait passes.
	l.AcquireBytes(IntakeGRPC, 1<<20, nil)
	l.AcquireBytes(IntakeGRPC, 1, nil) // warm the waiter pool
	if got := testing.AllocsPerRun(100, func() {
		if l.AcquireBytes(IntakeGRPC, 1, nil) {
			t.Fatal("granted while full")
		}
	}); got != 0 {
		t.Errorf("waiting acquire: %v allocs/op, want 0", got)
	}
	l.ReleaseBytes(IntakeGRPC, 1<<20)
}

func TestAccountZeroAlloc(t *testing.T) {
	l := NewLimiter(LimiterConfig{MaxBytes: 1 << 20, Wait: time.Microsecond})
	a := l.NewAccount(IntakeGRPC)
	if got := testing.AllocsPerRun(1000, func() {
		tick, ok := a.Acquire(4096, nil)
		if !ok {
			t.Fatal("refused with nothing held")
		}
		a.Release(4096, tick)
	}); got != 0 {
		t.Errorf("account acquire+release: %v allocs/op, want 0", got)
	}
}
