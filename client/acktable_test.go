package client

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// The table against a map, under a random mix of inserts, removes and sweeps, with ids that
// run ahead (new requests) while some stay behind for long (retries keep their ids), through
// growth from the smallest size.
func TestAckTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newAckTable(2, 0)
	want := map[uint64]*request{}
	streams := []*stream{{}, {}, {}}
	next := uint64(1)
	for step := range 200_000 {
		switch op := rng.IntN(10); {
		case op < 5:
			r := &request{id: next, stream: streams[rng.IntN(len(streams))], sentAt: int64(step)}
			next++
			tab.insert(r)
			want[r.id] = r
		case op < 9:
			// Mostly recent ids, sometimes an old one, sometimes one never inserted.
			var id uint64
			switch k := rng.IntN(10); {
			case k < 7 && next > 1:
				id = next - 1 - uint64(rng.IntN(min(int(next-1), 64)))
			case k < 9:
				id = 1 + uint64(rng.Uint64N(next))
			default:
				id = next + 1000
			}
			owner := streams[rng.IntN(len(streams))]
			if rng.IntN(4) == 0 {
				owner = nil
			}
			got := tab.remove(id, owner)
			w, ok := want[id]
			switch {
			case ok && (owner == nil || w.stream == owner):
				if got != w {
					t.Fatalf("step %d: remove(%d) = %v, want %v", step, id, got, w)
				}
				delete(want, id)
			case got != nil:
				t.Fatalf("step %d: remove(%d) returned a request it should not", step, id)
			}
		default:
			s := streams[rng.IntN(len(streams))]
			cutoff := int64(step - rng.IntN(5000))
			out := tab.takeIf(func(r *request) bool { return r.stream == s && r.sentAt < cutoff }, nil)
			for _, r := range out {
				if w := want[r.id]; w != r {
					t.Fatalf("step %d: swept %d which is not in the map", step, r.id)
				}
				delete(want, r.id)
			}
			for id, r := range want {
				if r.stream == s && r.sentAt < cutoff {
					t.Fatalf("step %d: sweep left %d", step, id)
				}
			}
		}
		if step%10_000 == 0 && tab.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(want))
		}
	}
	var left []uint64
	for _, r := range tab.takeIf(func(*request) bool { return true }, nil) {
		left = append(left, r.id)
	}
	var wantLeft []uint64
	for id := range want {
		wantLeft = append(wantLeft, id)
	}
	slices.Sort(left)
	slices.Sort(wantLeft)
	if !slices.Equal(left, wantLeft) {
		t.Fatalf("left %d ids, want %d", len(left), len(wantLeft))
	}
	if tab.len() != 0 {
		t.Fatalf("len %d after taking everything", tab.len())
	}
}

// Concurrent inserts and removes of disjoint ids leave exactly what was not removed.
func TestAckTableConcurrent(t *testing.T) {
	tab := newAckTable(ackShardBits, 64)
	const workers, per = 8, 5000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &stream{}
			for i := range per {
				id := uint64(w*per + i + 1)
				tab.insert(&request{id: id, stream: s})
				if i%2 == 0 {
					if r := tab.remove(id, s); r == nil || r.id != id {
						t.Errorf("remove %d failed", id)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := tab.len(); n != workers*per/2 {
		t.Fatalf("len %d, want %d", n, workers*per/2)
	}
}

func TestAckTableRejectsMisuse(t *testing.T) {
	tab := newAckTable(1, 0)
	mustPanic(t, "id 0", func() { tab.insert(&request{}) })
	tab.insert(&request{id: 5})
	mustPanic(t, "duplicate id", func() { tab.insert(&request{id: 5}) })
	if tab.remove(0, nil) != nil {
		t.Error("remove(0) found something")
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}
