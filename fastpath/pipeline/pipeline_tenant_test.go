package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Requests of two tenants admitted in turns make batches of one tenant each: no batch ever
// mixes them, and each tenant's requests arrive in order.
func TestPipelineBatchesApartByTenant(t *testing.T) {
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.BatchMaxItems = 4
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, cfg, r)
	acme, beta := mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta")
	want := map[string][]byte{}
	for i := range 10 {
		for _, tn := range []*tenant.Tenant{acme, beta, nil} {
			e := entry(10, byte(i))
			label := ts.Default().String()
			if tn != nil {
				label = tn.String()
			}
			want[label] = append(want[label], e...)
			if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: e, Items: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.Flush()
	got := map[string][]byte{}
	for _, b := range r.batches() {
		if b.items > 4 {
			t.Fatalf("a batch of %d items", b.items)
		}
		got[b.tenant] = append(got[b.tenant], b.body...)
	}
	for label, w := range want {
		if !bytes.Equal(got[label], w) {
			t.Fatalf("tenant %q: got %d bytes, want its %d in order", label, len(got[label]), len(w))
		}
	}
	if len(got) != 3 {
		t.Fatalf("tenants seen: %d, want 3", len(got))
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("queued %d after every batch finished", q)
	}
}

// Open batches of many tenants are sealed by age, by Flush and by Close, each once.
func TestPipelineSealsEveryTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 100})
		cfg := testConfig()
		cfg.Tenants = ts
		cfg.BatchMaxAge = 5 * time.Millisecond
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		const n = 40
		for i := range n {
			tn := mustLookup(t, ts, fmt.Sprint("t", i))
			if _, err := p.Admit(Request{Signal: fastpath.Metrics, Origin: Origin{Tenant: tn}, Body: entry(10, byte(i)), Items: 1}); err != nil {
				t.Fatal(err)
			}
		}
		// Past the age and the flusher's next tick (a quarter of the age): every batch is sealed.
		time.Sleep(cfg.BatchMaxAge + cfg.BatchMaxAge/4)
		synctest.Wait()
		seen := map[string]int{}
		for _, b := range r.batches() {
			seen[b.tenant]++
		}
		if len(seen) != n {
			t.Fatalf("%d tenants' batches sealed by age, want %d", len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("tenant %s sealed %d times", k, c)
			}
		}

		cfg.BatchMaxAge = time.Hour
		r2 := &recorder{name: "r2", ok: true}
		p2, err := New(cfg, []Destination{r2})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			tn := mustLookup(t, ts, fmt.Sprint("t", i))
			p2.Admit(Request{Signal: fastpath.Logs, Origin: Origin{Tenant: tn}, Body: entry(10, byte(i)), Items: 1})
		}
		p2.Close()
		if got := len(r2.batches()); got != n {
			t.Fatalf("Close sealed %d batches, want %d", got, n)
		}
	})
}

// A batch goes to the destinations that take its tenant, and to no other.
func TestPipelineRoutesByTenant(t *testing.T) {
	routes := []tenant.Match{
		{Header: "x-scope-orgid", Values: []string{"acme"}},
		{Header: "x-scope-orgid", Values: []string{"beta"}},
		{},
	}
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: routes})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.Ack = AckUpstream
	ra, rb, rest := &recorder{name: "a", ok: true}, &recorder{name: "b", ok: true}, &recorder{name: "rest", ok: true}
	p := newTestPipeline(t, cfg, ra, rb, rest)
	for _, v := range []string{"acme", "beta", "zed"} {
		b, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: mustLookup(t, ts, v)}, Body: entry(10, v[0]), Items: 1})
		if err != nil {
			t.Fatal(err)
		}
		p.Flush()
		if ok, err := b.Wait(t.Context()); !ok || err != nil {
			t.Fatalf("%s: delivered %v, %v", v, ok, err)
		}
		b.Unref()
	}
	// UDS and Kafka requests are the default tenant's: the rest.
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 'd'), Items: 1}); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	f := func(r *recorder, want ...string) {
		t.Helper()
		var got []string
		for _, b := range r.batches() {
			got = append(got, b.tenant)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s got tenants %q, want %q", r.name, got, want)
		}
	}
	f(ra, "acme")
	f(rb, "beta")
	f(rest, "zed", "")
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("queued %d: a batch waits for a destination it was never given to", q)
	}
}

// Without a destination for the rest, the default tenant's requests (UDS, Kafka) are refused
// at admission rather than admitted to go nowhere (with a spool: TestAdmissionTenants).
func TestPipelineRefusesUnroutedTenant(t *testing.T) {
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Routes: []tenant.Match{{Header: "x-scope-orgid", Values: []string{"acme"}}}})
	cfg := testConfig()
	cfg.Tenants = ts
	p := newTestPipeline(t, cfg, &recorder{name: "a", ok: true})
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1}); !errors.Is(err, tenant.ErrNoRoute) {
		t.Fatalf("Consume: %v, want tenant.ErrNoRoute", err)
	}
	acme := mustLookup(t, ts, "acme")
	if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: acme}, Body: entry(10, 2), Items: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, []Destination{&recorder{name: "a"}, &recorder{name: "b"}}); err == nil {
		t.Fatal("one route for two destinations was accepted")
	}
}
