package feed

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
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
		f.SetRoute(rs[0], s.Written())
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
