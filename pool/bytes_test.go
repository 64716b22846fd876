package pool

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestTiers(t *testing.T) {
	f := func(size, wantCap int) {
		t.Helper()
		b := GetBytes(size)
		if len(*b) != 0 || cap(*b) != wantCap {
			t.Errorf("GetBytes(%d): len %d cap %d, want len 0 cap %d", size, len(*b), cap(*b), wantCap)
		}
		if got := Cap(size); got != wantCap {
			t.Errorf("Cap(%d) = %d, want %d", size, got, wantCap)
		}
		PutBytes(b)
	}
	f(-1, 1<<10)
	f(0, 1<<10)
	f(1, 1<<10)
	f(1<<10, 1<<10)
	f(1<<10+1, 2<<10)
	f(3000, 4<<10)
	f(64<<10, 64<<10)
	f(64<<10+1, 128<<10)
	f(MaxSize-1, MaxSize)
	f(MaxSize, MaxSize)
}

func TestTierIndex(t *testing.T) {
	for i := range numTiers {
		c := 1 << (minShift + i)
		if got := getTier(c); got != i {
			t.Errorf("getTier(%d) = %d, want %d", c, got, i)
		}
		if i > 0 {
			if got := getTier(c/2 + 1); got != i {
				t.Errorf("getTier(%d) = %d, want %d", c/2+1, got, i)
			}
		}
		if got := putTier(c); got != i {
			t.Errorf("putTier(%d) = %d, want %d", c, got, i)
		}
		if got := putTier(2*c - 1); got != i {
			t.Errorf("putTier(%d) = %d, want %d", 2*c-1, got, i)
		}
	}
}

// A buffer grown by append past a tier boundary must come back only through a tier whose
// promise it honours: whatever GetBytes returns has at least the requested capacity.
func TestGrownBufferKeepsPromise(t *testing.T) {
	b := GetBytes(1 << 10)
	*b = append(*b, make([]byte, 3000)...) // cap now somewhere in [3000, 6144)
	grown := cap(*b)
	PutBytes(b)
	for range 100 {
		g := GetBytes(grown)
		if cap(*g) < grown {
			t.Fatalf("GetBytes(%d) returned cap %d", grown, cap(*g))
		}
		if len(*g) != 0 {
			t.Fatalf("GetBytes returned len %d, want 0", len(*g))
		}
		PutBytes(g)
	}
}

func TestOversized(t *testing.T) {
	before := testutil.ToFloat64(oversizedGets)
	b := GetBytes(MaxSize + 1)
	if len(*b) != 0 || cap(*b) != MaxSize+1 {
		t.Fatalf("oversized GetBytes: len %d cap %d", len(*b), cap(*b))
	}
	if got := testutil.ToFloat64(oversizedGets) - before; got != 1 {
		t.Fatalf("otlpgate_pool_oversized_gets_total grew by %v, want 1", got)
	}
	PutBytes(b) // dropped: must not reach a tier
	for i := range numTiers {
		for {
			v := tiers[i].Get()
			if v == nil {
				break
			}
			if v.(*[]byte) == b {
				t.Fatalf("oversized buffer found in tier %d", i)
			}
		}
	}
}

func TestPutBytesDropsSmallAndNil(t *testing.T) {
	PutBytes(nil)
	small := make([]byte, 10, 100)
	PutBytes(&small)
	if len(small) != 10 {
		t.Fatalf("PutBytes modified a buffer it dropped: len %d", len(small))
	}
	for {
		v := tiers[0].Get()
		if v == nil {
			break
		}
		if v.(*[]byte) == &small {
			t.Fatal("undersized buffer was pooled")
		}
	}
}
