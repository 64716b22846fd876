//go:build !race

package client

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Forwarding known tenants' headers allocates nothing: a unary call's context is made once
// per tenant, and an OTLP/HTTP request's headers are rewritten in place from batch to batch.
func TestForwardHeadersZeroAlloc(t *testing.T) {
	u := newHTTPUpstream(t, nil)
	u.answer = func(_ hit, ctx *fasthttp.RequestCtx) { ctx.SetContentType("application/x-protobuf") }
	u.record = false
	d, err := New(httpConfig(t, u, "concurrency=1,forward-headers=x-scope-orgid|x-region"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	pc := pipeline.DefaultConfig()
	pc.BatchMaxItems = 1
	pc.Tenants = ts
	p, err := pipeline.New(pc, []pipeline.Destination{d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	w := newHTTPWorker(d, fastpath.Traces)
	lookup := func(org, region string) *tenant.Tenant {
		var k tenant.Key
		ts.AddString(&k, org)
		ts.AddString(&k, region)
		tn, err := ts.Lookup(&k)
		if err != nil {
			t.Fatal(err)
		}
		return tn
	}
	acme, beta := lookup("acme", "eu"), lookup("beta", "")
	body := traceBody("z", 2, 100)
	timer := stoppedTimer()
	cycle := func() {
		for _, tn := range []*tenant.Tenant{acme, beta} {
			if _, err := p.Admit(pipeline.Request{Signal: fastpath.Traces, Origin: pipeline.Origin{Tenant: tn}, Body: body, Items: 1}); err != nil {
				panic(err)
			}
			w.call(d.next(fastpath.Traces, timer))
			d.callCtx(tn)
		}
	}
	cycle()
	if allocs := testing.AllocsPerRun(300, cycle); allocs != 0 {
		t.Fatalf("%v allocations per two tenants' requests", allocs)
	}
	if got := value(d.m.ackedRequests); got != 2*(1+1+300) { // the first cycle, AllocsPerRun's warm-up, 300 runs
		t.Fatalf("acknowledged %d of %d", got, 2*(1+1+300))
	}
}
