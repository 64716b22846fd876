package feed

import (
	"slices"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/spool"
)

// Spooled requests keep their tenant: a feeder builds batches of one tenant each, skips (and
// finishes) the records of tenants its destination does not take, and the batches carry the
// tenant. Records of an old spool, without meta, are the default tenant's.
func TestFeederKeepsTenants(t *testing.T) {
	routes := []fastpath.Match{{Header: "x-scope-orgid", Values: []string{"acme"}}, {}}
	ts, err := fastpath.NewTenants(fastpath.TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: routes})
	if err != nil {
		t.Fatal(err)
	}
	tenant := func(v string) *fastpath.Tenant {
		var k fastpath.TenantKey
		ts.AddString(&k, v)
		tn, err := ts.Lookup(&k)
		if err != nil {
			t.Fatal(err)
		}
		return tn
	}
	acme, beta := tenant("acme"), tenant("beta")

	fs := spool.NewCrashFS()
	c := spool.DefaultConfig()
	c.Dir, c.Sync, c.SegmentBytes, c.MaxBytes, c.CheckpointInterval = "/spool", spool.SyncNone, 4<<10, 1<<20, time.Hour
	c.Meta = true
	s, err := spool.Open(c, fs, []string{"d", "e"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(0, 1, rec(0, 100)); err != nil { // written before tenants: no meta
		t.Fatal(err)
	}
	l := Log{Spool: s}
	// Records 1..8 alternate acme and beta; 9 is the default tenant's.
	for i := 1; i <= 8; i++ {
		tn := acme
		if i%2 == 0 {
			tn = beta
		}
		if err := l.Append(0, tn, 1, rec(i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Append(0, ts.Default(), 1, rec(9, 100)); err != nil {
		t.Fatal(err)
	}

	// run feeds destination dest until it was given want records, finishing each batch.
	run := func(name string, dest, want int) map[string][]int {
		t.Helper()
		d := newDest()
		cfg := feedConfig()
		cfg.Tenants, cfg.Dest = ts, dest
		f, err := New(cfg, s.Reader(name), d, nil)
		if err != nil {
			t.Fatal(err)
		}
		f.Start()
		defer f.Stop()
		got := map[string][]int{}
		for n := 0; n < want; {
			for _, b := range d.take(t, 1) {
				if b.Tenant == nil {
					t.Fatal("a batch without a tenant")
				}
				got[b.Tenant.String()] = append(got[b.Tenant.String()], ids(b, 100)...)
				n += len(ids(b, 100))
				b.Done(true)
			}
		}
		for range 1000 { // bounded: 10 s at most
			if s.Reader(name).Unfinished() == 0 {
				return got
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s: %d records unfinished", name, s.Reader(name).Unfinished())
		return nil
	}
	a := run("d", 0, 4)
	if len(a) != 1 || !slices.Equal(a["acme"], []int{1, 3, 5, 7}) {
		t.Fatalf("the acme destination got %v", a)
	}
	rest := run("e", 1, 6)
	if len(rest) != 2 || !slices.Equal(rest["beta"], []int{2, 4, 6, 8}) || !slices.Equal(rest[""], []int{0, 9}) {
		t.Fatalf("the destination for the rest got %v", rest)
	}
}
