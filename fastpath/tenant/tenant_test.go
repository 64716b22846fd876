package tenant

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTenants(t *testing.T, cfg Config) *Table {
	t.Helper()
	ts, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// lookup interns the tuple vals (nil: the header is missing) in ts.
func lookup(ts *Table, vals ...string) (*Tenant, error) {
	var k Key
	for _, v := range vals {
		ts.AddString(&k, v)
	}
	return ts.Lookup(&k)
}

func mustLookup(t *testing.T, ts *Table, vals ...string) *Tenant {
	t.Helper()
	tn, err := lookup(ts, vals...)
	if err != nil {
		t.Fatalf("lookup %q: %v", vals, err)
	}
	return tn
}

func TestTenantsInternTuples(t *testing.T) {
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid", "x-region"}, Default: "anonymous", Max: 10})
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
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 3})
	mustLookup(t, ts, "a")
	mustLookup(t, ts, "b") // with the default: 3
	before := testutil.ToFloat64(tenantRefusedMax)
	if _, err := lookup(ts, "c"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a fourth tuple: %v, want ErrTooMany", err)
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
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	for _, v := range []string{strings.Repeat("a", 256), "tab\there", "new\nline", "caf\xc3\xa9", "\x7f"} {
		before := testutil.ToFloat64(tenantRefusedValue)
		if _, err := lookup(ts, v); !errors.Is(err, ErrValue) {
			t.Errorf("%q: %v, want ErrValue", v, err)
		}
		if testutil.ToFloat64(tenantRefusedValue)-before != 1 {
			t.Errorf("%q: refusal not counted", v)
		}
	}
	mustLookup(t, ts, strings.Repeat("a", 255))
	mustLookup(t, ts, "with space ~!")
}

func TestTenantsConfigValidate(t *testing.T) {
	ok := Config{Headers: []string{"x-scope-orgid"}, Max: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	f := func(mod func(*Config), want string) {
		t.Helper()
		c := ok
		c.Headers = slices.Clone(ok.Headers)
		mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error containing %q", c, err, want)
		}
	}
	f(func(c *Config) { c.Headers = nil }, "no tenant header")
	f(func(c *Config) { c.Headers = []string{"X-Scope-OrgID"} }, "lower-case")
	f(func(c *Config) { c.Headers = []string{"a", "a"} }, "named twice")
	f(func(c *Config) { c.Headers = []string{"grpc-timeout"} }, "reserved")
	f(func(c *Config) { c.Headers = []string{"x-id-bin"} }, "reserved")
	f(func(c *Config) { c.Headers = []string{"authorization"} }, "protocol header")
	f(func(c *Config) { c.Headers = strings.Split("a,b,c,d,e,f,g,h,i", ",") }, "at most 8")
	f(func(c *Config) { c.Default = "bad\x01" }, "-intake.headers.default")
	f(func(c *Config) { c.Max = 0 }, "-intake.max-tenants")
	f(func(c *Config) { c.Routes = []Match{{Header: "x-other", Values: []string{"a"}}} }, "not one of -intake.headers")
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
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: routes})
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
	ts = newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: routes[:2]})
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
	a := newTenants(t, Config{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	acme := mustLookup(t, a, "acme", "eu")

	same := newTenants(t, Config{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	got, err := same.FromRecord(acme.Record())
	if err != nil || !slices.Equal(got.Values(), []string{"acme", "eu"}) {
		t.Fatalf("same headers: %v %v", got, err)
	}
	if again, _ := same.FromRecord(acme.Record()); again != got {
		t.Fatal("a replayed tenant was interned twice")
	}

	other := newTenants(t, Config{Headers: []string{"x-region", "x-team"}, Default: "none", Max: 10})
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
	full := newTenants(t, Config{Headers: []string{"x-scope-orgid", "x-region"}, Max: 1})
	if got, err := full.FromRecord(acme.Record()); err != nil || got.String() != "acme|eu" {
		t.Fatalf("replay past the bound: %v %v", got, err)
	}
}

// Filling a table costs each new tenant about the same, however many the table holds: the
// bytes allocated per tenant while filling 5,000 stay within a few KiB (a tenant, its strings
// and its share of the index's growth), where copying the index on each insert allocated
// about a hundred KiB per tenant at that size, and 20,000 took most of a minute.
func TestTenantsFillLinear(t *testing.T) {
	const n = 5000
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: n + 1})
	names := make([][]byte, n)
	for i := range names {
		names[i] = fmt.Appendf(nil, "tenant-%05d", i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, v := range names {
		var k Key
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
