package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/prometheus/client_golang/prometheus"
)

// A tenant with an open batch is not swept however long it is idle, and its batch reaches
// the destination as its own; once sealed, the tenant's place goes to a new one.
func TestTenantsIdleKeepOpenBatch(t *testing.T) {
	ts, clock := idleTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 2})
	cfg := testConfig()
	cfg.Tenants = ts
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, cfg, r)
	a := mustLookup(t, ts, "a")
	if _, err := p.Admit(Request{Signal: fastpath.Logs, Origin: Origin{Tenant: a}, Body: entry(10, 'a'), Items: 1}); err != nil {
		t.Fatal(err)
	}
	clock.Add(int64(testIdle) * 10)
	if _, err := lookup(ts, "b"); !errors.Is(err, tenant.ErrTooMany) {
		t.Fatalf("b while a's batch is open: %v, want tenant.ErrTooMany", err)
	}
	if a.Expired() {
		t.Fatal("a expired with an open batch")
	}
	p.Flush()
	got := r.batches()
	if len(got) != 1 || got[0].tenant != "a" || !bytes.Equal(got[0].body, entry(10, 'a')) {
		t.Fatalf("batches %+v, want a's one", got)
	}
	b := mustLookup(t, ts, "b")
	if !a.Expired() || b.ID() != a.ID() {
		t.Fatalf("after the flush: a expired %v, b id %d (a's %d)", a.Expired(), b.ID(), a.ID())
	}
}

// A request that looked its tenant up before the tenant expired (a stream's tenant, a
// request held up) still has batches of its own, though a new tenant has the old one's id.
func TestTenantsIdleHeldTenantApart(t *testing.T) {
	ts, clock := idleTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 2})
	cfg := testConfig()
	cfg.Tenants = ts
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, cfg, r)
	a := mustLookup(t, ts, "a")
	clock.Add(int64(testIdle) + 1)
	b := mustLookup(t, ts, "b")
	if !a.Expired() || b.ID() != a.ID() {
		t.Fatalf("a expired %v, b id %d (a's %d)", a.Expired(), b.ID(), a.ID())
	}
	want := map[string][]byte{}
	for i := range 6 {
		tn, fill := b, byte('b')
		if i%2 == 0 {
			tn, fill = a, 'a'
		}
		e := entry(10, fill)
		want[tn.String()] = append(want[tn.String()], e...)
		if _, err := p.Admit(Request{Signal: fastpath.Logs, Origin: Origin{Tenant: tn}, Body: e, Items: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if b.Expired() || b.Pins() != 1 {
		t.Fatalf("b: expired %v, pins %d", b.Expired(), b.Pins())
	}
	p.Flush()
	got := map[string][]byte{}
	for _, rb := range r.batches() {
		if got[rb.tenant] != nil {
			t.Fatalf("two batches of %q", rb.tenant)
		}
		got[rb.tenant] = rb.body
	}
	if len(got) != 2 || !bytes.Equal(got["a"], want["a"]) || !bytes.Equal(got["b"], want["b"]) {
		t.Fatalf("batches %q, want %q", got, want)
	}
	if n := a.Pins(); n != 0 || !a.Expired() {
		t.Fatalf("a's pins after the flush: %d, expired %v", n, a.Expired())
	}
}

// An expired tenant's values coming back go to the destinations their match-header names,
// apart from the tenant that took the old id.
func TestTenantsIdleComeBackRouted(t *testing.T) {
	ts, clock := idleTenants(t, tenant.Config{Headers: []string{"x-org"}, Max: 3, Routes: []tenant.Match{
		{Header: "x-org", Values: []string{"acme"}}, {},
	}})
	cfg := testConfig()
	cfg.Tenants = ts
	acme, rest := &recorder{name: "acme", ok: true}, &recorder{name: "rest", ok: true}
	p := newTestPipeline(t, cfg, acme, rest)
	old := mustLookup(t, ts, "acme")
	mustLookup(t, ts, "beta")
	clock.Add(int64(testIdle) + 1)
	gamma := mustLookup(t, ts, "gamma")
	back := mustLookup(t, ts, "acme")
	if back == old || !old.Expired() || (gamma.ID() != old.ID() && back.ID() != old.ID()) {
		t.Fatalf("acme back as %p (was %p), ids gamma %d acme %d (old %d)", back, old, gamma.ID(), back.ID(), old.ID())
	}
	for i := range 4 {
		for _, c := range []struct {
			tn   *tenant.Tenant
			fill byte
		}{{back, 'a'}, {gamma, 'g'}} {
			if _, err := p.Admit(Request{Signal: fastpath.Metrics, Origin: Origin{Tenant: c.tn}, Body: entry(10+i, c.fill), Items: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.Flush()
	for _, c := range []struct {
		r      *recorder
		tenant string
		fill   byte
	}{{acme, "acme", 'a'}, {rest, "gamma", 'g'}} {
		var body []byte
		for _, b := range c.r.batches() {
			if b.tenant != c.tenant {
				t.Fatalf("%s got a batch of %q", c.r.name, b.tenant)
			}
			body = append(body, b.body...)
		}
		var want []byte
		for i := range 4 {
			want = append(want, entry(10+i, c.fill)...)
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("%s got %q, want %q", c.r.name, body, want)
		}
	}
}

// Lookups, admissions and sweeps at once: every batch holds its own tenant's requests only,
// and the table stays within its bound. Run with -race.
func TestTenantsIdleConcurrent(t *testing.T) {
	ts, clock := idleTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 6})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.BatchMaxItems = 2
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, cfg, r)
	expired := metricValue(t, "otlpgate_tenants_expired_total")
	admitted := churnTenants(t, p, ts, clock, func(tn *tenant.Tenant, n, _ int) error {
		_, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: entry(10, byte('a'+n)), Items: 1})
		return err
	})
	p.Flush()
	items := 0
	for _, b := range r.batches() {
		want := byte('a' + mustAtoi(t, b.tenant[1:]))
		for e := b.body; len(e) > 0; e = e[12:] {
			if e[2] != want || e[11] != want {
				t.Fatalf("a batch of %s holds %q", b.tenant, e[:12])
			}
		}
		items += b.items
	}
	if metricValue(t, "otlpgate_tenants_expired_total") == expired {
		for _, tn := range ts.All() {
			t.Logf("%s pins %d now %d", tn, tn.Pins(), clock.Load())
		}
		t.Fatalf("no tenant expired: the test did not test expiry (admitted %d, Len %d, all %v)", admitted, ts.Len(), ts.All())
	}
	if int64(items) != admitted || admitted == 0 {
		t.Fatalf("%d items in batches, %d admitted", items, admitted)
	}
	for _, tn := range ts.All() {
		if n := tn.Pins(); n != 0 {
			t.Fatalf("%s pins %d with no batch open", tn, n)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A labelled series outlives its tenant's expiry and goes on counting when the tuple comes
// back; an expired tenant past the top stays summed in _other; no series ever goes down.
func TestTenantsIdleMetricsSeries(t *testing.T) {
	ts, clock := idleTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 3, MetricsTop: 2})
	cfg := testConfig()
	cfg.Tenants = ts
	p := newTestPipeline(t, cfg, sink{})
	admit := func(v string, items int) {
		t.Helper()
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: mustLookup(t, ts, v)}, Body: entry(10, 1), Items: items}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(acme, other int) {
		t.Helper()
		w := fmt.Sprintf(`
# HELP otlpgate_tenant_admitted_items_total Spans, data points and log records admitted, by tenant (-intake.headers; the first -tenant.metrics.top tenants seen, the others summed as _other).
# TYPE otlpgate_tenant_admitted_items_total counter
otlpgate_tenant_admitted_items_total{tenant="_default"} 0
otlpgate_tenant_admitted_items_total{tenant="_other"} %d
otlpgate_tenant_admitted_items_total{tenant="acme"} %d
`, other, acme)
		if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(w), "otlpgate_tenant_admitted_items_total"); err != nil {
			t.Fatal(err)
		}
	}
	admit("acme", 3)
	admit("beta", 5)
	p.Flush()
	want(3, 5)
	clock.Add(int64(testIdle) + 1)
	if n := ts.Sweep(); n != 2 {
		t.Fatalf("swept %d, want 2", n)
	}
	want(3, 5)
	admit("acme", 1)
	admit("gamma", 7) // acme's old id, not its series
	p.Flush()
	want(4, 12)
}

// churnTenants has four goroutines look up tenants t0..t39 in turns, 300 times each, moving
// clock by a third of the idle time every fourth lookup, and admit one request for each tenant
// found (n is its number, i the step), while a fifth flushes p and sweeps ts, checking that the
// table stays within 6; it returns how many admissions succeeded.
func churnTenants(t *testing.T, p *Pipeline, ts *tenant.Table, clock *atomic.Int64, admit func(tn *tenant.Tenant, n, i int) error) int64 {
	t.Helper()
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			var k tenant.Key
			for i := range 300 {
				n := (g*7 + i) % 40
				if i%4 == 0 {
					clock.Add(int64(testIdle) / 3)
				}
				k.Reset()
				ts.AddString(&k, fmt.Sprint("t", n))
				tn, err := ts.Lookup(&k)
				if errors.Is(err, tenant.ErrTooMany) {
					continue
				}
				if err == nil {
					err = admit(tn, n, i)
				}
				if err != nil {
					t.Error(err)
					return
				}
				admitted.Add(1)
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			if i%4 == 0 {
				p.Flush() // unpins the tenants, which may then expire
			}
			ts.Sweep()
			if ts.Len() > 6 {
				t.Errorf("Len %d past the bound", ts.Len())
			}
		}
	})
	wg.Wait()
	return admitted.Load()
}

// Without any request, idle tenants still leave: the pipeline's age flusher sweeps, so that a
// quiet gateway's otlpgate_tenants comes down and their memory is freed.
func TestTenantsIdleSweptWithoutTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts, clock := idleTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 8})
		cfg := testConfig()
		cfg.Tenants = ts
		cfg.BatchMaxAge = time.Hour // b's batch stays open; the flusher ticks every 100 ms
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		a, b := mustLookup(t, ts, "a"), mustLookup(t, ts, "b")
		if _, err := p.Admit(Request{Signal: fastpath.Logs, Origin: Origin{Tenant: b}, Body: entry(10, 'b'), Items: 1}); err != nil {
			t.Fatal(err)
		}
		expired := metricValue(t, "otlpgate_tenants_expired_total")
		clock.Add(int64(testIdle) + 1)
		time.Sleep(100 * time.Millisecond) // the flusher's next tick sweeps
		synctest.Wait()
		if !a.Expired() || ts.Len() != 2 || metricValue(t, "otlpgate_tenants_expired_total")-expired != 1 {
			t.Fatalf("no request for the idle time: a expired %v, Len %d (want 2: the default and b, whose batch is open), expired %v",
				a.Expired(), ts.Len(), metricValue(t, "otlpgate_tenants_expired_total")-expired)
		}
		if b.Expired() {
			t.Fatal("b expired with its batch open")
		}
	})
}
