package tenant

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The index against a map: random adds and removals, through rebuilds that grow it and
// rebuilds that only clear tombstones, each key found where the map has it and nowhere else.
func TestTenantIndexModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		x := newTenantIndex(maphash.MakeSeed(), minIndexSlots)
		model := map[string]*Tenant{}
		keys := make([]string, 300)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
		}
		for op := range 5000 {
			key := keys[rng.IntN(len(keys))]
			if t0, ok := model[key]; ok && rng.IntN(2) == 0 {
				x.removeLocked(t0)
				delete(model, key)
			} else if !ok {
				tn := &Tenant{key: key}
				x = x.addLocked(tn)
				model[key] = tn
			}
			if x.filled*2 > len(x.slots) {
				t.Fatalf("seed %d op %d: %d of %d slots filled", seed, op, x.filled, len(x.slots))
			}
			if x.len() != len(model) {
				t.Fatalf("seed %d op %d: len %d, model %d", seed, op, x.len(), len(model))
			}
			if op%50 == 0 {
				for _, k := range keys {
					if got := x.find([]byte(k)); got != model[k] {
						t.Fatalf("seed %d op %d: find %q = %p, model %p", seed, op, k, got, model[k])
					}
				}
			}
		}
	}
}

// Lookups of known tenants while others are added and swept find them every time, and run
// under the race detector against the writer's stores.
func TestTenantIndexConcurrentReaders(t *testing.T) {
	ts, clock := idleTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 1 << 16})
	known := []*Tenant{mustLookup(t, ts, "k0"), mustLookup(t, ts, "k1"), mustLookup(t, ts, "k2")}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				want := known[(i+r)%len(known)]
				if got := ts.index.Load().find([]byte(want.key)); got != want {
					t.Errorf("find %q = %v during inserts", want.key, got)
					return
				}
			}
		})
	}
	expired := testutil.ToFloat64(tenantsExpired)
	for i := range 3000 {
		mustLookup(t, ts, fmt.Sprint("churn", i))
		if i%100 == 99 {
			// The known tenants stay in use; the churn goes idle and leaves.
			clock.Add(int64(testIdle) / 4)
			for _, k := range known {
				if got := mustLookup(t, ts, k.values[0]); got != k {
					t.Fatalf("%q was interned again", k.values[0])
				}
			}
			ts.Sweep()
		}
	}
	close(stop)
	wg.Wait()
	if n, gone := ts.Len(), testutil.ToFloat64(tenantsExpired)-expired; n > 1+len(known)+500 || gone < 2000 {
		t.Fatalf("Len %d, %v expired, after sweeps", n, gone)
	}
}
