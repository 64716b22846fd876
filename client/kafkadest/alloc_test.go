//go:build !race

package kafkadest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/pool"
)

// Cutting a batch into records and making its kgo records allocates nothing in otlpgate's
// code once the pools are warm, with round robin and by trace id, cut below the resource level
// or not. What kgo allocates once it holds the records (its batches, the request) is its own
// and not counted here.
func TestBuildAllocs(t *testing.T) {
	for _, tc := range []struct {
		name           string
		byTrace, byRes bool
		limit          int
		tenant         bool
	}{{"round_robin", false, false, 1 << 20, false}, {"round_robin_cut", false, false, 4 << 10, false}, {"trace_id", true, false, 1 << 20, false},
		{"trace_id_cut", true, false, 4 << 10, false}, {"resource", false, true, 1 << 20, false}, {"resource_cut", false, true, 4 << 10, false},
		{"trace_id_tenant_headers", true, false, 1 << 20, true}} {
		t.Run(tc.name, func(t *testing.T) {
			req := traceRequest(t, 4, 2, 50, 20, 40)
			d := &Dest{cfg: Config{MaxMessageBytes: tc.limit, ByTraceID: tc.byTrace, ByResource: tc.byRes, Topics: [fastpath.NumSignals]string{"t", "m", "l"}}, cuts: cutEntries.WithLabelValues("alloc-test")}
			var tn *tenant.Tenant
			if tc.tenant {
				// A batch's tenant becomes its records' headers (forward-headers), made once per tenant.
				d.cfg.ForwardHeaders = []string{"x-scope-orgid"}
				tn = testTenant(t, "acme")
			}
			for i := range d.limits {
				d.limits[i].Store(int64(tc.limit))
			}
			pl := pool.NewPayload(len(req))
			*pl.Buf() = append((*pl.Buf())[:0], req...)
			b := pipeline.NewBatch(fastpath.Traces, 400, pl, noOwner{})
			b.Tenant = tn
			defer b.Done(true)
			run := func() {
				s := getSend()
				s.d, s.b = d, b
				if err := s.build(); err != nil {
					t.Fatal(err)
				}
				if len(s.recs) == 0 {
					t.Fatal("no record")
				}
				if h := s.recs[0].Headers; tc.tenant && (len(h) != 1 || h[0].Key != "x-scope-orgid" || string(h[0].Value) != "acme") {
					t.Fatalf("record headers %v, want the tenant's", h)
				}
				putSend(s)
			}
			for range 10 {
				run()
			}
			if n := testing.AllocsPerRun(100, run); n != 0 {
				t.Errorf("%.1f allocations per batch", n)
			}
		})
	}
}

// The brokers' answers to a batch's records, each acknowledged, and the end of the batch
// (counted delivered, finished, its send and records put back) allocate nothing in
// otlpgate's code either: with TestBuildAllocs this is every step a batch takes in the
// destination but kgo's own.
func TestAnswerAllocs(t *testing.T) {
	req := traceRequest(t, 4, 2, 50, 20, 40)
	d := &Dest{cfg: Config{Name: "alloc-answer", MaxMessageBytes: 4 << 10, ByTraceID: true, Topics: [fastpath.NumSignals]string{"t", "m", "l"}},
		cuts: cutEntries.WithLabelValues("alloc-answer"), acked: ackedRecords.WithLabelValues("alloc-answer"),
		counts: client.NewCounts("alloc-answer"), log: slog.New(slog.DiscardHandler)}
	for r := range d.failed {
		d.failed[r] = failedRecords.WithLabelValues("alloc-answer", failNames[r])
	}
	for i := range d.limits {
		d.limits[i].Store(4 << 10)
	}
	d.mu.waiting = map[*send]*time.Timer{}
	finished := 0
	d.finish = func(_ *pipeline.Batch, delivered, _ bool) {
		if delivered {
			finished++
		}
	}
	pl := pool.NewPayload(len(req))
	*pl.Buf() = append((*pl.Buf())[:0], req...)
	b := pipeline.NewBatch(fastpath.Traces, 400, pl, noOwner{})
	defer b.Done(true)
	run := func() {
		s := getSend()
		s.d, s.b, s.signal = d, b, b.Signal
		d.active.Add(1)
		d.sending.Add(1)
		d.held.Add(int64(b.Len()))
		if err := s.build(); err != nil {
			t.Fatal(err)
		}
		s.pending.Store(int32(len(s.recs)))
		for _, r := range s.recs {
			d.onRecord(r, nil)
		}
	}
	for range 10 {
		run()
	}
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("%.1f allocations per batch", n)
	}
	if finished != 111 || d.held.Load() != 0 || d.sending.Load() != 0 {
		t.Errorf("%d batches delivered, want 111; held %d bytes and %d sends", finished, d.held.Load(), d.sending.Load())
	}
}

// testTenant is the tenant whose x-scope-orgid is value, from a table of that one header.
func testTenant(t *testing.T, value string) *tenant.Tenant {
	t.Helper()
	tc := tenant.DefaultConfig()
	tc.Headers = []string{"x-scope-orgid"}
	ts, err := tenant.NewTable(tc)
	if err != nil {
		t.Fatal(err)
	}
	var k tenant.Key
	ts.Add(&k, []byte(value))
	tn, err := ts.Lookup(&k)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}
