package client

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// The table against a map, under a random mix of inserts, removes and sweeps, with ids that
// run ahead (new requests) while some stay behind for long (retries keep their ids), through
// growth from the smallest size.
func TestAckTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newAckTable(2)
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
	tab := newAckTable(ackShardBits)
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
	tab := newAckTable(1)
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

// A destination with about a million requests allowed in flight per signal (16 streams of
// window 65536) costs no more at creation than one with the defaults: the ack table starts at
// its smallest and grows with what is actually pending, where it used to be sized for
// streams × window × signals up front (hundreds of MiB here). Shards then grow on demand: 5000
// requests pending at once all fit and are found.
func TestAckTableSizedOnDemand(t *testing.T) {
	cfg := testConfig(t, "127.0.0.1:1")
	cfg.Streams, cfg.Window = 16, 1<<16
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := New(cfg, nil)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	const bound = 1 << 20 // the gRPC client, metrics and 32 small shards: about 72 KiB
	got := after.TotalAlloc - before.TotalAlloc
	if got > bound {
		t.Fatalf("New allocated %d bytes, want at most %d", got, bound)
	}
	t.Logf("New allocated %d bytes", got)
	for i := range d.acks.shards {
		if n := len(d.acks.shards[i].mu.keys); n != ackShardMinSlots {
			t.Fatalf("shard %d starts with %d slots, want %d", i, n, ackShardMinSlots)
		}
	}

	const pending = 5000
	s := &stream{}
	for id := uint64(1); id <= pending; id++ {
		d.acks.insert(&request{id: id, stream: s})
	}
	if n := d.acks.len(); n != pending {
		t.Fatalf("len %d, want %d", n, pending)
	}
	for id := uint64(pending); id >= 1; id-- {
		if r := d.acks.remove(id, s); r == nil || r.id != id {
			t.Fatalf("id %d not found", id)
		}
	}
	for i := range d.acks.shards {
		// pending/32 ≈ 157 per shard, kept at most half full: 512 slots.
		if n := len(d.acks.shards[i].mu.keys); n != 512 {
			t.Errorf("shard %d grew to %d slots, want 512", i, n)
		}
	}
}

// Only a stream destination holds acknowledgement slots: a unary one never waits for an ack,
// and a thousand idle unary destinations would otherwise hold 36 MB of empty slots.
func TestAckSlotsOnlyForStreams(t *testing.T) {
	for _, c := range []struct {
		cfg    Config
		shards int
	}{
		{unaryConfig(t, "127.0.0.1:9", ProtocolV1, 2), 0},
		{unaryConfig(t, "127.0.0.1:9", ProtocolOTEP, 2), 0},
		{streamConfig(t, "127.0.0.1:9", 1, 1), 1 << ackShardBits},
	} {
		d, err := New(c.cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(d.acks.shards); got != c.shards {
			t.Errorf("%s %s: %d ack shards, want %d", c.cfg.Protocol, c.cfg.Mode, got, c.shards)
		}
		if n := d.acks.len(); n != 0 {
			t.Errorf("%s %s: %d acks waiting", c.cfg.Protocol, c.cfg.Mode, n)
		}
		d.Shutdown(context.Background())
	}
}
