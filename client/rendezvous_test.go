package client

import (
	"fmt"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

// With 10 backends and 100,000 keys, removing one moves between 0.8/N and 1.2/N of the keys,
// only those it owned; adding an eleventh moves between 0.8/(N+1) and 1.2/(N+1), only to it.
// Every backend owns between 0.8/N and 1.2/N of the keys.
func TestRendezvousMovesOneNth(t *testing.T) {
	const n, keys = 10, 100_000
	var addrs []string
	for i := range n {
		addrs = append(addrs, fmt.Sprintf("10.0.0.%d:4317", i+1))
	}
	all := newRendezvous(addrs)
	owner := make([]string, keys)
	per := map[string]int{}
	for k := range keys {
		owner[k] = addrs[all.Pick(fastpath.HashKey(fmt.Appendf(nil, "trace-%d", k)))]
		per[owner[k]]++
	}
	for _, a := range addrs {
		if c := per[a]; c < keys*8/10/n || c > keys*12/10/n {
			t.Errorf("%s owns %d keys, want %d±20%%", a, c, keys/n)
		}
	}

	removed := addrs[3]
	rest := append(append([]string{}, addrs[:3]...), addrs[4:]...)
	less := newRendezvous(rest)
	moved := 0
	for k := range keys {
		now := rest[less.Pick(fastpath.HashKey(fmt.Appendf(nil, "trace-%d", k)))]
		if now != owner[k] {
			moved++
			if owner[k] != removed {
				t.Fatalf("key %d moved from %s, which stayed, to %s", k, owner[k], now)
			}
		}
	}
	if lo, hi := keys*8/10/n, keys*12/10/n; moved < lo || moved > hi {
		t.Errorf("removing one of %d moved %d keys, want %d..%d", n, moved, lo, hi)
	}

	added := "10.0.0.99:4317"
	more := append(append([]string{}, addrs...), added)
	bigger := newRendezvous(more)
	moved = 0
	for k := range keys {
		now := more[bigger.Pick(fastpath.HashKey(fmt.Appendf(nil, "trace-%d", k)))]
		if now != owner[k] {
			moved++
			if now != added {
				t.Fatalf("key %d moved from %s to %s, not to the new backend", k, owner[k], now)
			}
		}
	}
	if lo, hi := keys*8/10/(n+1), keys*12/10/(n+1); moved < lo || moved > hi {
		t.Errorf("adding one to %d moved %d keys, want %d..%d", n, moved, lo, hi)
	}
}

// The owner of a key depends on the set, not on the order the addresses came in.
func TestRendezvousOrderFree(t *testing.T) {
	a := newRendezvous([]string{"a:1", "b:1", "c:1"})
	b := newRendezvous([]string{"c:1", "a:1", "b:1"})
	names := [][]string{{"a:1", "b:1", "c:1"}, {"c:1", "a:1", "b:1"}}
	for k := range uint64(1000) {
		h := fastpath.HashKey(fmt.Append(nil, k))
		if x, y := names[0][a.Pick(h)], names[1][b.Pick(h)]; x != y {
			t.Fatalf("key %d: %s in one order, %s in the other", k, x, y)
		}
	}
}

func BenchmarkRendezvousPick(b *testing.B) {
	for _, n := range []int{3, 10} {
		var addrs []string
		for i := range n {
			addrs = append(addrs, fmt.Sprintf("10.0.0.%d:4317", i))
		}
		r := newRendezvous(addrs)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			k := uint64(0)
			for b.Loop() {
				k += 0x9e3779b97f4a7c15
				_ = r.Pick(k)
			}
		})
	}
}
