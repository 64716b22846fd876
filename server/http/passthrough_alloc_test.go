//go:build !race

package httpserver

import (
	"log/slog"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// A compressed protobuf request that takes the pass-through way (inflated under the intake
// limiter, scanned, its received bytes appended to the batch) allocates nothing either.
func TestHandlerPassThroughAllocs(t *testing.T) {
	req := traces(t, 1, 50)
	for _, tc := range []struct {
		name, coding string
		enc          pipeline.Encoding
		body         []byte
	}{{"gzip", "gzip", pipeline.EncodingGzip, gzipped(t, req)}, {"zstd", "zstd", pipeline.EncodingZstd, zstded(t, req)}} {
		h := newPassThroughHarness(t, tc.enc)
		ctx := h.ctx(tc.coding, tc.body)
		run := func() {
			h.srv.handle(ctx)
			if ctx.Response.StatusCode() != 200 {
				t.Fatalf("%s: status %d %q", tc.name, ctx.Response.StatusCode(), ctx.Response.Body())
			}
			ctx.Response.Reset()
		}
		for range 10 {
			run() // warm the pools
		}
		before := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed")
		if got := testing.AllocsPerRun(500, run); got != 0 {
			t.Errorf("%s: %v allocs per request, want 0", tc.name, got)
		}
		if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed") - before; n != 501 {
			t.Errorf("%s: %v requests passed through, want 501", tc.name, n)
		}
		h.p.Flush()
		if items := h.sink.Items(); items != 50*(10+501) {
			t.Errorf("%s: destination got %d items, want %d", tc.name, items, 50*511)
		}
	}
}

// With -intake.headers and -tenant.rate, two tenants' gzip requests through the handler pass
// through into batches of their own tenant, their rate taken, allocating nothing either.
func TestHandlerTenantPassThroughAllocs(t *testing.T) {
	ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Rate: tenant.Rate{PerSecond: 1e12, Burst: 1e12}})
	if err != nil {
		t.Fatal(err)
	}
	h := &handlerHarness{sink: &testkit.Discard{}}
	pc := pipeline.DefaultConfig()
	pc.BatchMaxAge = 1 << 62
	pc.Tenants = ts
	if h.p, err = pipeline.New(pc, []pipeline.Destination{wireDiscard{h.sink, pipeline.EncodingGzip}}); err != nil {
		t.Fatal(err)
	}
	defer h.p.Close()
	sc := DefaultConfig()
	sc.Tenants = ts
	if h.srv, err = New(sc, h.p, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	step := h.twoTenants(t, "gzip", gzipped(t, traces(t, 1, 20)))
	before := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed")
	if got := testing.AllocsPerRun(500, step); got != 0 {
		t.Errorf("%v allocs per two tenants' compressed requests, want 0", got)
	}
	if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed") - before; n != 2*501 {
		t.Errorf("%v requests passed through, want %d", n, 2*501)
	}
	h.p.Flush()
	if items := h.sink.Items(); items != 20*2*511 {
		t.Errorf("destination got %d items, want %d", items, 20*2*511)
	}
}
