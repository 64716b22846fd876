package feed

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/process"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/spool"
)

// A reload that gives a tenant, which the destination taking the rest had, to a new
// destination by name: the records spooled before the reload go by the routes they were
// admitted under, so the destination for the rest still delivers those it had not read yet
// (its upstream was down), and only those; the records spooled after are the new
// destination's. Deciding every record by the routes in force when it is read finished the
// first ones unread, delivered by no one (the new destination reads from the reload on).
func TestFeederRoutesByWhenSpooled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acmeOnly := tenant.Match{Header: "x-scope-orgid", Values: []string{"acme"}}
		gammaOnly := tenant.Match{Header: "x-scope-orgid", Values: []string{"gamma"}}
		ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
			Routes: []tenant.Match{acmeOnly, {}}})
		if err != nil {
			t.Fatal(err)
		}
		var k tenant.Key
		ts.AddString(&k, "gamma")
		gamma, err := ts.Lookup(&k)
		if err != nil {
			t.Fatal(err)
		}
		fs := spool.NewCrashFS()
		c := spool.DefaultConfig()
		c.Dir, c.Sync, c.SegmentBytes, c.MaxBytes, c.CheckpointInterval = "/spool", spool.SyncNone, 4<<10, 1<<20, time.Hour
		c.Meta = true
		s, err := spool.Open(c, fs, []string{"acme", "rest"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pc := pipeline.DefaultConfig()
		pc.Tenants = ts
		adm, err := NewAdmission(pc, s)
		if err != nil {
			t.Fatal(err)
		}
		admit := func(from, to int) {
			t.Helper()
			for i := from; i <= to; i++ {
				if _, err := adm.Admit(pipeline.Request{Signal: 0, Origin: pipeline.Origin{Tenant: gamma}, Body: entryOf(rec(i, 100-2)), Items: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		d := newDest()
		cfg := feedConfig()
		cfg.Tenants, cfg.Dest = ts, 1
		f, err := New(cfg, s.Reader("rest"), d, nil)
		if err != nil {
			t.Fatal(err)
		}
		admit(1, 4) // gamma is the rest's: for f, not read yet

		// The reload: the rest's destination moves first, gamma gets one of its own.
		rs, err := ts.SetRoutes([]tenant.Match{{}, acmeOnly, gammaOnly})
		if err != nil {
			t.Fatal(err)
		}
		f.SetRoute(Route{Tenants: rs[0]}, s.Written())
		admit(5, 8) // the new destination's

		f.Start()
		defer f.Stop()
		var got []int
		for len(got) < 4 {
			for _, b := range d.take(t, 1) {
				got = append(got, entryIDs(b)...)
				b.Done(true)
			}
		}
		synctest.Wait()
		if !slices.Equal(got, []int{1, 2, 3, 4}) || len(d.got) != 0 {
			t.Fatalf("the destination for the rest got %v, want the records spooled before the reload, 1 to 4", got)
		}
		if n := s.Reader("rest").Unfinished(); n != 0 {
			t.Fatalf("%d records unfinished", n)
		}
	})
}

// A reload that changes the destinations with routes by resource attribute (co, which took
// checkout, removed; the rest's destination moved first; cart, new, takes cart): the records
// spooled before the reload go by the router that split them, at the position each
// destination had then, and the later ones by the new router at the new positions, so that
// each resource reaches exactly one destination. Reading every record by the router in force
// gave the rest's destination the checkout resources co had taken, which co had delivered
// already, and left the cart resources spooled before to no one.
func TestFeederResourceRoutesByWhenSpooled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		router := func(rules ...string) pipeline.Router {
			var rs [][]process.Match
			for _, r := range rules {
				var m []process.Match
				if r != "" {
					var err error
					if m, err = process.ParseRoute(r); err != nil {
						t.Fatal(err)
					}
				}
				rs = append(rs, m)
			}
			rt, err := process.NewRouter(rs)
			if err != nil {
				t.Fatal(err)
			}
			return rt
		}
		before := router("resource:service.name=checkout*", "")
		after := router("", "resource:service.name=cart*")
		c := spool.DefaultConfig()
		c.Dir, c.Sync, c.SegmentBytes, c.MaxBytes, c.CheckpointInterval = "/spool", spool.SyncNone, 4<<10, 1<<20, time.Hour
		s, err := spool.Open(c, spool.NewCrashFS(), []string{"co", "rest"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pc := pipeline.DefaultConfig()
		pc.Router = before
		adm, err := NewAdmission(pc, s)
		if err != nil {
			t.Fatal(err)
		}
		admit := func(services ...string) {
			t.Helper()
			if _, err := adm.Admit(pipeline.Request{Signal: fastpath.Logs, Body: logsOf(t, services...), Items: len(services)}); err != nil {
				t.Fatal(err)
			}
		}
		admit("checkout-1", "cart-1", "search-1")
		admit("cart-2")
		admit("checkout-3")

		rest, cart := newDest(), newDest()
		cfg := feedConfig()
		cfg.Router, cfg.Dest = before, 1
		fRest, err := New(cfg, s.Reader("rest"), rest, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The reload: co leaves (its feeder had delivered its records), the rest moves to
		// position 0, cart comes at 1 and reads from the reload on.
		adm.SetDestinationsRouter([]pipeline.Destination{rest, cart}, after)
		from := s.Written()
		fRest.SetRoute(Route{Tenants: tenant.DestRoute{Dest: 0}, Resources: after}, from)
		r, err := s.AddReader("cart")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Router, cfg.Dest = after, 1
		fCart, err := New(cfg, r, cart, nil)
		if err != nil {
			t.Fatal(err)
		}
		admit("checkout-4", "cart-4", "search-4")
		admit("cart-5")

		got := func(name string, d *dest, f *Feeder, want []string) {
			t.Helper()
			f.Start()
			defer f.Stop()
			var names []string
			for len(names) < len(want) {
				for _, b := range d.take(t, 1) {
					ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b.Payload.Bytes())
					if err != nil {
						t.Fatal(err)
					}
					if ld.LogRecordCount() != b.Items {
						t.Errorf("%s: a batch of %d records says %d", name, ld.LogRecordCount(), b.Items)
					}
					for _, rl := range ld.ResourceLogs().All() {
						v, _ := rl.Resource().Attributes().Get("service.name")
						names = append(names, v.Str())
					}
					b.Done(true)
				}
			}
			synctest.Wait()
			if !slices.Equal(names, want) || len(d.got) != 0 {
				t.Errorf("%s got %q (and %d batches more), want %q", name, names, len(d.got), want)
			}
		}
		got("rest", rest, fRest, []string{"cart-1", "search-1", "cart-2", "checkout-4", "search-4"})
		got("cart", cart, fCart, []string{"cart-4", "cart-5"})
		for _, name := range []string{"rest", "cart"} {
			if n := s.Reader(name).Unfinished(); n != 0 {
				t.Errorf("%s: %d records unfinished", name, n)
			}
		}
	})
}
