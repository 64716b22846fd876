package fastpath

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTenants(t *testing.T, cfg TenantsConfig) *Tenants {
	t.Helper()
	ts, err := NewTenants(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// lookup interns the tuple vals (nil: the header is missing) in ts.
func lookup(ts *Tenants, vals ...string) (*Tenant, error) {
	var k TenantKey
	for _, v := range vals {
		ts.AddString(&k, v)
	}
	return ts.Lookup(&k)
}

func mustLookup(t *testing.T, ts *Tenants, vals ...string) *Tenant {
	t.Helper()
	tn, err := lookup(ts, vals...)
	if err != nil {
		t.Fatalf("lookup %q: %v", vals, err)
	}
	return tn
}

func TestTenantsInternTuples(t *testing.T) {
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid", "x-region"}, Default: "anonymous", Max: 10})
	def := ts.Default()
	if def.ID() != 0 || !slices.Equal(def.Values(), []string{"anonymous", "anonymous"}) {
		t.Fatalf("default tenant: id %d values %q", def.ID(), def.Values())
	}
	acme := mustLookup(t, ts, "acme", "eu")
	if again := mustLookup(t, ts, "acme", "eu"); again != acme {
		t.Fatal("the same tuple was interned twice")
	}
	if acme.ID() != 1 || acme.String() != "acme|eu" {
		t.Fatalf("acme: id %d label %q", acme.ID(), acme.String())
	}
	if v, ok := acme.Value("x-region"); !ok || v != "eu" {
		t.Fatalf("Value(x-region) = %q, %v", v, ok)
	}
	if _, ok := acme.Value("x-other"); ok {
		t.Fatal("Value of a header the table does not have")
	}
	// A missing header is the default value, whichever header it is; an explicit default is
	// the same tenant.
	if got := mustLookup(t, ts, "", ""); got != def {
		t.Fatalf("no headers: %q, want the default tenant", got)
	}
	if got := mustLookup(t, ts, "anonymous", ""); got != def {
		t.Fatalf("explicit default: %q, want the default tenant", got)
	}
	// Values are positional: (eu, acme) is another tenant than (acme, eu).
	if got := mustLookup(t, ts, "eu", "acme"); got == acme {
		t.Fatal("swapped values read as the same tenant")
	}
	if ts.Len() != 3 {
		t.Fatalf("Len %d, want 3", ts.Len())
	}
}

func TestTenantsBound(t *testing.T) {
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 3})
	mustLookup(t, ts, "a")
	mustLookup(t, ts, "b") // with the default: 3
	before := testutil.ToFloat64(tenantRefusedMax)
	if _, err := lookup(ts, "c"); !errors.Is(err, ErrTooManyTenants) {
		t.Fatalf("a fourth tuple: %v, want ErrTooManyTenants", err)
	}
	if got := testutil.ToFloat64(tenantRefusedMax) - before; got != 1 {
		t.Fatalf("refusals counted %v, want 1", got)
	}
	// Known tenants are still served at the bound.
	mustLookup(t, ts, "a")
	mustLookup(t, ts, "")
	if ts.Len() != 3 {
		t.Fatalf("Len %d, want 3", ts.Len())
	}
}

func TestTenantsBadValues(t *testing.T) {
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 10})
	for _, v := range []string{strings.Repeat("a", 256), "tab\there", "new\nline", "caf\xc3\xa9", "\x7f"} {
		before := testutil.ToFloat64(tenantRefusedValue)
		if _, err := lookup(ts, v); !errors.Is(err, ErrTenantValue) {
			t.Errorf("%q: %v, want ErrTenantValue", v, err)
		}
		if testutil.ToFloat64(tenantRefusedValue)-before != 1 {
			t.Errorf("%q: refusal not counted", v)
		}
	}
	mustLookup(t, ts, strings.Repeat("a", 255))
	mustLookup(t, ts, "with space ~!")
}

func TestTenantsConfigValidate(t *testing.T) {
	ok := TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	f := func(mod func(*TenantsConfig), want string) {
		t.Helper()
		c := ok
		c.Headers = slices.Clone(ok.Headers)
		mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error containing %q", c, err, want)
		}
	}
	f(func(c *TenantsConfig) { c.Headers = nil }, "no tenant header")
	f(func(c *TenantsConfig) { c.Headers = []string{"X-Scope-OrgID"} }, "lower-case")
	f(func(c *TenantsConfig) { c.Headers = []string{"a", "a"} }, "named twice")
	f(func(c *TenantsConfig) { c.Headers = []string{"grpc-timeout"} }, "reserved")
	f(func(c *TenantsConfig) { c.Headers = []string{"x-id-bin"} }, "reserved")
	f(func(c *TenantsConfig) { c.Headers = []string{"authorization"} }, "protocol header")
	f(func(c *TenantsConfig) { c.Headers = strings.Split("a,b,c,d,e,f,g,h,i", ",") }, "at most 8")
	f(func(c *TenantsConfig) { c.Default = "bad\x01" }, "-intake.headers.default")
	f(func(c *TenantsConfig) { c.Max = 0 }, "-intake.max-tenants")
	f(func(c *TenantsConfig) { c.Routes = []Match{{Header: "x-other", Values: []string{"a"}}} }, "not one of -intake.headers")
}

func TestParseMatch(t *testing.T) {
	f := func(in string, want Match) {
		t.Helper()
		got, err := ParseMatch(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got.Header != want.Header || !slices.Equal(got.Values, want.Values) || (got.Values == nil) != (want.Values == nil) {
			t.Fatalf("%q: %+v, want %+v", in, got, want)
		}
		if got.String() != strings.ReplaceAll(strings.ToLower(in), " ", "") && in != "X-Scope-OrgID:acme" {
			t.Fatalf("%q: String() = %q", in, got.String())
		}
	}
	f("x-scope-orgid:acme", Match{Header: "x-scope-orgid", Values: []string{"acme"}})
	f("X-Scope-OrgID:acme", Match{Header: "x-scope-orgid", Values: []string{"acme"}})
	f("x-scope-orgid:acme|beta", Match{Header: "x-scope-orgid", Values: []string{"acme", "beta"}})
	f("x-scope-orgid:*", Match{Header: "x-scope-orgid"})
	f("x-scope-orgid:", Match{Header: "x-scope-orgid", Values: []string{""}})
	for _, bad := range []string{"acme", ":acme", "x y:acme", "x:" + strings.Repeat("v", 256), "grpc-x:a"} {
		if _, err := ParseMatch(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Routes: a destination with named values takes those; one with * takes every value beside
// the others; one without a match takes what no destination with named values takes.
func TestTenantRoutes(t *testing.T) {
	routes := []Match{
		{Header: "x-scope-orgid", Values: []string{"acme"}},
		{Header: "x-scope-orgid", Values: []string{"beta", "acme"}},
		{},                        // the rest
		{Header: "x-scope-orgid"}, // every value
	}
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: routes})
	f := func(v string, want ...int) {
		t.Helper()
		tn := mustLookup(t, ts, v)
		var got []int
		for i := range routes {
			if tn.Takes(i) {
				got = append(got, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%q goes to %v, want %v", v, got, want)
		}
	}
	f("acme", 0, 1, 3)
	f("beta", 1, 3)
	f("zed", 2, 3)
	f("", 2, 3)

	// Without a destination for the rest, an unmatched tenant has none: refused, counted.
	ts = newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: routes[:2]})
	before := testutil.ToFloat64(tenantRefusedNoRoute)
	if _, err := lookup(ts, "zed"); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("unmatched tenant: %v, want ErrNoRoute", err)
	}
	if testutil.ToFloat64(tenantRefusedNoRoute)-before != 1 {
		t.Fatal("no_route refusal not counted")
	}
	if ts.Default().Routed() {
		t.Fatal("the default tenant has a route")
	}
}

// A tenant's record survives a restart with other -intake.headers: values are found by
// header name, headers the record lacks take the default.
func TestTenantRecord(t *testing.T) {
	a := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	acme := mustLookup(t, a, "acme", "eu")

	same := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	got, err := same.FromRecord(acme.Record())
	if err != nil || !slices.Equal(got.Values(), []string{"acme", "eu"}) {
		t.Fatalf("same headers: %v %v", got, err)
	}
	if again, _ := same.FromRecord(acme.Record()); again != got {
		t.Fatal("a replayed tenant was interned twice")
	}

	other := newTenants(t, TenantsConfig{Headers: []string{"x-region", "x-team"}, Default: "none", Max: 10})
	got, err = other.FromRecord(acme.Record())
	if err != nil || !slices.Equal(got.Values(), []string{"eu", "none"}) {
		t.Fatalf("other headers: %v %v", got, err)
	}
	if got, err := other.FromRecord(nil); err != nil || got != other.Default() {
		t.Fatalf("no record: %v %v, want the default tenant", got, err)
	}
	for _, bad := range [][]byte{{9}, {1}, {1, 1, 5, 'a'}, {1, 2, 1, 'a', 1, 'b'}} {
		if _, err := other.FromRecord(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	// Replays are interned past the bound: their requests were admitted already.
	full := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid", "x-region"}, Max: 1})
	if got, err := full.FromRecord(acme.Record()); err != nil || got.String() != "acme|eu" {
		t.Fatalf("replay past the bound: %v %v", got, err)
	}
}

// Requests of two tenants admitted in turns make batches of one tenant each: no batch ever
// mixes them, and each tenant's requests arrive in order.
func TestPipelineBatchesApartByTenant(t *testing.T) {
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 10})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.BatchMaxItems = 4
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, cfg, r)
	acme, beta := mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta")
	want := map[string][]byte{}
	for i := range 10 {
		for _, tn := range []*Tenant{acme, beta, nil} {
			e := entry(10, byte(i))
			label := ts.Default().String()
			if tn != nil {
				label = tn.String()
			}
			want[label] = append(want[label], e...)
			if _, err := p.AdmitTenant(Origin{Tenant: tn}, Traces, e, 1, LayoutV1); err != nil {
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
		ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 100})
		cfg := testConfig()
		cfg.Tenants = ts
		cfg.BatchMaxAge = 5 * time.Millisecond
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		const n = 40
		for i := range n {
			tn := mustLookup(t, ts, fmt.Sprint("t", i))
			if _, err := p.AdmitTenant(Origin{Tenant: tn}, Metrics, entry(10, byte(i)), 1, LayoutV1); err != nil {
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
			p2.AdmitTenant(Origin{Tenant: tn}, Logs, entry(10, byte(i)), 1, LayoutV1)
		}
		p2.Close()
		if got := len(r2.batches()); got != n {
			t.Fatalf("Close sealed %d batches, want %d", got, n)
		}
	})
}

// A batch goes to the destinations that take its tenant, and to no other.
func TestPipelineRoutesByTenant(t *testing.T) {
	routes := []Match{
		{Header: "x-scope-orgid", Values: []string{"acme"}},
		{Header: "x-scope-orgid", Values: []string{"beta"}},
		{},
	}
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: routes})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.Ack = AckUpstream
	ra, rb, rest := &recorder{name: "a", ok: true}, &recorder{name: "b", ok: true}, &recorder{name: "rest", ok: true}
	p := newTestPipeline(t, cfg, ra, rb, rest)
	for _, v := range []string{"acme", "beta", "zed"} {
		b, err := p.AdmitTenant(Origin{Tenant: mustLookup(t, ts, v)}, Traces, entry(10, v[0]), 1, LayoutV1)
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
	if err := p.Consume(Traces, entry(10, 'd'), 1); err != nil {
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
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 10,
		Routes: []Match{{Header: "x-scope-orgid", Values: []string{"acme"}}}})
	cfg := testConfig()
	cfg.Tenants = ts
	p := newTestPipeline(t, cfg, &recorder{name: "a", ok: true})
	if err := p.Consume(Traces, entry(10, 1), 1); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("Consume: %v, want ErrNoRoute", err)
	}
	acme := mustLookup(t, ts, "acme")
	if _, err := p.AdmitTenant(Origin{Tenant: acme}, Traces, entry(10, 2), 1, LayoutV1); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, []Destination{&recorder{name: "a"}, &recorder{name: "b"}}); err == nil {
		t.Fatal("one route for two destinations was accepted")
	}
}

// Filling a table costs each new tenant about the same, however many the table holds: the
// bytes allocated per tenant while filling 5,000 stay within a few KiB (a tenant, its strings
// and its share of the index's growth), where copying the index on each insert allocated
// about a hundred KiB per tenant at that size, and 20,000 took most of a minute.
func TestTenantsFillLinear(t *testing.T) {
	const n = 5000
	ts := newTenants(t, TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: n + 1})
	names := make([][]byte, n)
	for i := range names {
		names[i] = fmt.Appendf(nil, "tenant-%05d", i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, v := range names {
		var k TenantKey
		ts.Add(&k, v)
		if _, err := ts.Lookup(&k); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if ts.Len() != n+1 {
		t.Fatalf("Len %d, want %d", ts.Len(), n+1)
	}
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per new tenant, filling %d", per, n)
	if per > 4<<10 {
		t.Fatalf("%d bytes allocated per new tenant filling %d: adding a tenant costs in proportion to the table", per, n)
	}
}
