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
	"github.com/otlpgate/otlpgate/spool"
)

// logsOf is a logs request of one resource per service, one record each named after it.
func logsOf(t *testing.T, services ...string) []byte {
	t.Helper()
	ld := plog.NewLogs()
	for _, s := range services {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", s)
		rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr(s)
	}
	b, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// With routes by resource attribute, admission spools a mixed request as one record of the
// entries some destination takes (the unrouted left out), and each feeder hands its
// destination only its entries, with their items; a record none of whose entries it takes is
// finished unread.
func TestFeederRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		co, err := process.ParseRoute("resource:service.name=checkout")
		if err != nil {
			t.Fatal(err)
		}
		rt, err := process.NewRouter([][]process.Match{co, nil})
		if err != nil {
			t.Fatal(err)
		}
		c := spool.DefaultConfig()
		c.Dir, c.Sync, c.SegmentBytes, c.MaxBytes, c.CheckpointInterval = "/spool", spool.SyncNone, 4<<10, 1<<20, time.Hour
		s, err := spool.Open(c, spool.NewCrashFS(), []string{"co", "rest"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pc := pipeline.DefaultConfig()
		pc.Router = rt
		adm, err := NewAdmission(pc, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range [][]string{{"cart", "checkout", "search"}, {"cart"}, {"checkout"}} {
			if _, err := adm.Admit(pipeline.Request{Signal: fastpath.Logs, Body: logsOf(t, req...), Items: len(req)}); err != nil {
				t.Fatal(err)
			}
		}
		run := func(name string, dest int, want []string) {
			t.Helper()
			d := newDest()
			cfg := feedConfig()
			cfg.Router, cfg.Dest = rt, dest
			f, err := New(cfg, s.Reader(name), d, nil)
			if err != nil {
				t.Fatal(err)
			}
			f.Start()
			defer f.Stop()
			var got []string
			for len(got) < len(want) {
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
						got = append(got, v.Str())
					}
					b.Done(true)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s got %q, want %q", name, got, want)
			}
			// The feeder has read every record and waits for more: those with none of its
			// destination's entries are finished too.
			synctest.Wait()
			if n := s.Reader(name).Unfinished(); n != 0 {
				t.Fatalf("%s: %d records unfinished", name, n)
			}
		}
		run("co", 0, []string{"checkout", "checkout"})
		run("rest", 1, []string{"cart", "search", "cart"})
	})
}
