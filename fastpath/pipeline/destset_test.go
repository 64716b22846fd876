package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// genDest is a destination of one generation of destination sets: it records the request ids
// of every batch it gets and finishes the batch at once; once retired (its set was replaced and
// SetDestinations returned) it must get nothing more.
type genDest struct {
	name    string
	gen     int
	retired atomic.Bool
	late    atomic.Int64 // batches enqueued after retirement
	mu      sync.Mutex
	ids     map[uint64]int
}

func (d *genDest) Name() string { return d.name }

func (d *genDest) Enqueue(b *Batch) error {
	if d.retired.Load() {
		d.late.Add(1)
	}
	body := b.Payload.Bytes()
	d.mu.Lock()
	for len(body) > 0 {
		_, _, n := protowire.ConsumeTag(body)
		v, m := protowire.ConsumeBytes(body[n:])
		d.ids[binary.BigEndian.Uint64(v)]++
		body = body[n+m:]
	}
	d.mu.Unlock()
	b.Done(true)
	return nil
}

// idEntry is a request of one resource entry whose payload starts with id.
func idEntry(id uint64) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 40), id)
	v = append(v, make([]byte, 32)...)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), v)
}

// While requests are admitted from several goroutines, the destination set is replaced again
// and again (sets of one to three destinations, each set its own instances). Every request
// reaches every destination of exactly one set, once, and that set was in force while the
// request was being admitted: installed when Consume began at the latest, and not installed
// after Consume returned. No destination gets a batch once SetDestinations replaced its set.
func TestSetDestinationsWhileAdmitting(t *testing.T) {
	for _, eager := range []bool{false, true} {
		t.Run(fmt.Sprintf("eager=%v", eager), func(t *testing.T) {
			cfg := testConfig()
			cfg.BatchMaxItems = 5
			cfg.BatchMaxAge = time.Millisecond
			cfg.Eager = eager
			newSet := func(gen int) []*genDest {
				var s []*genDest
				for i := range 1 + gen%3 {
					s = append(s, &genDest{name: fmt.Sprintf("g%d-%d", gen, i), gen: gen, ids: map[uint64]int{}})
				}
				return s
			}
			sets := [][]*genDest{newSet(0)}
			asDests := func(s []*genDest) []Destination {
				out := make([]Destination, len(s))
				for i, d := range s {
					out[i] = d
				}
				return out
			}
			p, err := New(cfg, asDests(sets[0]))
			if err != nil {
				t.Fatal(err)
			}
			var installed, started atomic.Int64 // generations: fully installed, swap begun
			type window struct{ lo, hi int64 }
			const workers, each, gens = 4, 3000, 40
			windows := make([]window, workers*each+1)

			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						id := uint64(1 + w*each + i)
						lo := installed.Load()
						if err := p.Consume(Request{Signal: fastpath.Traces, Body: idEntry(id), Items: 1}); err != nil {
							t.Errorf("request %d: %v", id, err)
							return
						}
						windows[id] = window{lo, started.Load()}
					}
				}()
			}
			for gen := 1; gen <= gens; gen++ {
				s := newSet(gen)
				sets = append(sets, s)
				started.Store(int64(gen))
				if err := p.SetDestinations(asDests(s)); err != nil {
					t.Fatal(err)
				}
				installed.Store(int64(gen))
				for _, d := range sets[gen-1] {
					d.retired.Store(true)
				}
				time.Sleep(time.Duration(gen%4) * time.Millisecond)
			}
			wg.Wait()
			p.Close()
			if q := p.QueuedBytes(); q != 0 {
				t.Fatalf("%d bytes still queued after Close", q)
			}

			for _, s := range sets {
				for _, d := range s {
					if n := d.late.Load(); n > 0 {
						t.Errorf("%s got %d batches after its set was replaced", d.name, n)
					}
				}
			}
			for id := uint64(1); id <= workers*each; id++ {
				got := -1
				for gen, s := range sets {
					n := 0
					for _, d := range s {
						d.mu.Lock()
						c := d.ids[id]
						d.mu.Unlock()
						if c > 1 {
							t.Fatalf("request %d reached %s %d times", id, d.name, c)
						}
						n += c
					}
					switch {
					case n == 0:
					case n != len(s) || got >= 0:
						t.Fatalf("request %d reached %d of the %d destinations of set %d (and set %d)", id, n, len(s), gen, got)
					default:
						got = gen
					}
				}
				if w := windows[id]; got < 0 || int64(got) < w.lo || int64(got) > w.hi {
					t.Fatalf("request %d went to set %d, admitted while sets %d..%d were in force", id, got, w.lo, w.hi)
				}
			}
		})
	}
}

// A pipeline with a log, an empty set and a closed pipeline are refused.
func TestSetDestinationsRefuses(t *testing.T) {
	p := newTestPipeline(t, testConfig(), &recorder{name: "a", ok: true})
	if err := p.SetDestinations(nil); err == nil {
		t.Error("an empty set was accepted")
	}
	p.Close()
	if err := p.SetDestinations([]Destination{&recorder{name: "b", ok: true}}); err != ErrClosed {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}

	// Tenant routes number the destinations by position: a new set would misroute tenants.
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Routes: []tenant.Match{{Header: "x-scope-orgid", Values: []string{"acme"}}}})
	cfg := testConfig()
	cfg.Tenants = ts
	routed := newTestPipeline(t, cfg, &recorder{name: "a", ok: true})
	if err := routed.SetDestinations([]Destination{&recorder{name: "b", ok: true}}); !errors.Is(err, ErrTenantRoutes) {
		t.Errorf("with tenant routes: %v, want ErrTenantRoutes", err)
	}
}

// With tenants (no routes), a signal holds an open batch per tenant: SetDestinations hands
// each tenant's open batch to the previous set, and a tenant's next request opens a batch of
// its own for the new set, still keyed by its tenant.
func TestSetDestinationsWithTenants(t *testing.T) {
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.BatchMaxAge = time.Hour // only SetDestinations and Flush seal
	old, next := &recorder{name: "old", ok: true}, &recorder{name: "next", ok: true}
	p := newTestPipeline(t, cfg, old)
	acme, beta := mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta")
	admit := func(tn *tenant.Tenant, fill byte) {
		t.Helper()
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: entry(10, fill), Items: 1}); err != nil {
			t.Fatal(err)
		}
	}
	admit(acme, 'a')
	admit(beta, 'b')
	if err := p.SetDestinations([]Destination{next}); err != nil {
		t.Fatal(err)
	}
	admit(acme, 'c')
	p.Flush()
	tenants := func(r *recorder) []string {
		var got []string
		for _, b := range r.batches() {
			got = append(got, b.tenant)
		}
		slices.Sort(got)
		return got
	}
	if got := tenants(old); !slices.Equal(got, []string{"acme", "beta"}) {
		t.Errorf("the previous set got tenants %q, want acme and beta", got)
	}
	if got := tenants(next); !slices.Equal(got, []string{"acme"}) {
		t.Errorf("the new set got tenants %q, want acme", got)
	}
	if n := len(old.batches()) + len(next.batches()); n != 3 {
		t.Errorf("%d batches, want 3", n)
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Errorf("%d bytes still queued", q)
	}
}

// SetDestinationsRoutes swaps the routes with the set: a batch open across the call goes by
// the routes of the set it was opened with, a later one by the new routes, so that a
// destination that moved keeps its tenants.
func TestSetDestinationsRoutes(t *testing.T) {
	acmeOnly := tenant.Match{Header: "x-scope-orgid", Values: []string{"acme"}}
	betaOnly := tenant.Match{Header: "x-scope-orgid", Values: []string{"beta"}}
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: []tenant.Match{acmeOnly, betaOnly}})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.BatchMaxAge = time.Hour // only SetDestinations and Flush seal
	a, b, c := &recorder{name: "a", ok: true}, &recorder{name: "b", ok: true}, &recorder{name: "c", ok: true}
	p := newTestPipeline(t, cfg, a, b)
	acme, beta := mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta")
	if _, err := lookup(ts, "gamma"); !errors.Is(err, tenant.ErrNoRoute) {
		t.Errorf("gamma before the swap: %v, want tenant.ErrNoRoute", err)
	}
	admit := func(tn *tenant.Tenant) {
		t.Helper()
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: entry(10, 'x'), Items: 1}); err != nil {
			t.Fatal(err)
		}
	}
	admit(acme)
	admit(beta)
	// b moves first, a leaves, c takes the rest.
	if err := p.SetDestinationsRoutes([]Destination{b, c}, Routes{Tenants: []tenant.Match{betaOnly, {}}}); err != nil {
		t.Fatal(err)
	}
	gamma := mustLookup(t, ts, "gamma")
	if !gamma.Routed() || !acme.Routed() || !acme.Takes(1) || acme.Takes(0) || !beta.Takes(0) || beta.Takes(1) {
		t.Errorf("after the swap: gamma routed %v, acme takes %v %v, beta takes %v %v",
			gamma.Routed(), acme.Takes(0), acme.Takes(1), beta.Takes(0), beta.Takes(1))
	}
	admit(acme)
	admit(beta)
	admit(gamma)
	p.Flush()
	tenants := func(r *recorder) []string {
		var got []string
		for _, bt := range r.batches() {
			got = append(got, bt.tenant)
		}
		slices.Sort(got)
		return got
	}
	for r, want := range map[*recorder][]string{a: {"acme"}, b: {"beta", "beta"}, c: {"acme", "gamma"}} {
		if got := tenants(r); !slices.Equal(got, want) {
			t.Errorf("%s got tenants %q, want %q", r.name, got, want)
		}
	}
	if err := p.SetDestinationsRoutes([]Destination{b}, Routes{Tenants: []tenant.Match{betaOnly, acmeOnly}}); err == nil {
		t.Error("two routes for one destination were accepted")
	}
	if err := p.SetDestinationsRoutes([]Destination{b}, Routes{Tenants: []tenant.Match{{Header: "x-other"}}}); err == nil {
		t.Error("a route on a header that is not a tenant header was accepted")
	}
}
