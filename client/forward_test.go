package client

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// tenantFeeder is a feeder whose pipeline has tenants x-scope-orgid and x-region.
func tenantFeeder(t *testing.T, d pipeline.Destination) (*feeder, *tenant.Table) {
	t.Helper()
	ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.DefaultConfig()
	cfg.Ack = pipeline.AckUpstream
	cfg.BatchMaxItems = 1
	cfg.BatchMaxAge = time.Hour
	cfg.Tenants = ts
	p, err := pipeline.New(cfg, []pipeline.Destination{d})
	if err != nil {
		t.Fatal(err)
	}
	f := &feeder{t: t, p: p, bodies: map[string][]byte{}}
	t.Cleanup(func() {
		f.p.Close()
		for _, b := range f.batches {
			b.Unref()
		}
	})
	return f, ts
}

// admitTenant admits a one-span trace batch tagged tag for the tenant of values vals.
func (f *feeder) admitTenant(ts *tenant.Table, tag string, vals ...string) {
	f.t.Helper()
	var k tenant.Key
	for _, v := range vals {
		ts.AddString(&k, v)
	}
	tn, err := ts.Lookup(&k)
	if err != nil {
		f.t.Fatal(err)
	}
	body := traceBody(tag, 1, 10)
	b, err := f.p.Admit(pipeline.Request{Signal: fastpath.Traces, Origin: pipeline.Origin{Tenant: tn}, Body: body, Items: 1})
	if err != nil {
		f.t.Fatal(err)
	}
	f.batches = append(f.batches, b)
	f.bodies[tag] = body
}

// forward-headers sends each batch's own tenant values on its unary gRPC call, next to the
// destination's fixed headers; an empty value and a header not named are not sent.
func TestForwardHeadersUnaryGRPC(t *testing.T) {
	transports(t, func(t *testing.T, transport string) {
		u := newUpstream(t)
		type call struct{ org, region, env string }
		var calls []call
		get := func(md metadata.MD, k string) string {
			if v := md.Get(k); len(v) > 0 {
				return strings.Join(v, ",")
			}
			return "<none>"
		}
		u.srvCtxHook = func(md metadata.MD) {
			u.mu.Lock()
			calls = append(calls, call{get(md, "x-scope-orgid"), get(md, "x-region"), get(md, "x-env")})
			u.mu.Unlock()
		}
		cfg := unaryConfig(t, u.addr, ProtocolV1, 1)
		cfg.Headers = map[string]string{"x-env": "prod"}
		cfg.ForwardHeaders = []string{"x-scope-orgid"}
		cfg.Transport = transport
		d := startDest(t, cfg)
		f, ts := tenantFeeder(t, d)
		f.admitTenant(ts, "a1", "acme", "eu")
		f.admitTenant(ts, "b1", "beta", "us")
		f.admitTenant(ts, "d1", "", "")
		f.admitTenant(ts, "a2", "acme", "us")
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("delivered %v", ok)
		}
		got := u.tags()
		u.mu.Lock()
		defer u.mu.Unlock()
		if len(calls) != 4 || !slices.Equal(got, []string{"a1", "b1", "d1", "a2"}) {
			t.Fatalf("calls %v for tags %v", calls, got)
		}
		want := []call{{"acme", "<none>", "prod"}, {"beta", "<none>", "prod"}, {"<none>", "<none>", "prod"}, {"acme", "<none>", "prod"}}
		if !slices.Equal(calls, want) {
			t.Fatalf("metadata %v, want %v", calls, want)
		}
	})
}

// The same over OTLP/HTTP: a request reused from batch to batch carries each batch's values,
// never the previous batch's.
func TestForwardHeadersHTTP(t *testing.T) {
	u := newHTTPUpstream(t, nil)
	d := startDest(t, httpConfig(t, u, "concurrency=1,forward-headers=x-scope-orgid|x-region"))
	f, ts := tenantFeeder(t, d)
	f.admitTenant(ts, "a1", "acme", "eu")
	f.admitTenant(ts, "b1", "beta", "")
	f.admitTenant(ts, "d1", "", "")
	f.admitTenant(ts, "a2", "acme", "us")
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	var got []string
	for _, h := range u.received() {
		got = append(got, h.tag+"="+h.orgID+"/"+h.region)
	}
	want := []string{"a1=acme/eu", "b1=beta/<none>", "d1=<none>/<none>", "a2=acme/us"}
	if !slices.Equal(got, want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
}

func TestParseForwardAndMatch(t *testing.T) {
	c, err := ParseDest("name=a,endpoint=h:1,protocol=v1,mode=unary,forward-headers=X-Scope-OrgID|x-region,match-header=x-scope-orgid:acme|beta", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.ForwardHeaders, []string{"x-scope-orgid", "x-region"}) || c.MatchHeader.String() != "x-scope-orgid:acme|beta" {
		t.Fatalf("forward %q match %q", c.ForwardHeaders, c.MatchHeader.String())
	}
	for spec, want := range map[string]string{
		"name=a,endpoint=h:1,protocol=otep,forward-headers=x-scope-orgid":                       "mode=unary",
		"name=a,endpoint=h:1,mode=unary,forward-headers=x-a|x-a":                                "named twice",
		"name=a,endpoint=h:1,mode=unary,forward-headers=authorization":                          "reserved",
		"name=a,endpoint=h:1,mode=unary,header=x-a:1,forward-headers=x-a":                       "header= too",
		"name=a,endpoint=h:1,match-header=acme":                                                 `key "match-header"`,
		"name=a,endpoint=h:1,match-header=x:a,match-header=x:b":                                 "given twice",
		"name=a,endpoint=http://h:1,protocol=http,forward-headers=content-type":                 "reserved",
		"name=a,endpoint=h:1,protocol=otep,mode=stream,forward-headers=x-scope-orgid,streams=2": "once per stream",
	} {
		_, err := ParseDest(spec, DefaultConfig())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error mentioning %q", spec, err, want)
		}
	}
}

// FailedRetryable with retry_delay_ms (an upstream otlpgate whose -tenant.rate the batch's
// tenant is over): the request waits at least the delay before it goes again, and the
// destination's other requests are not held up meanwhile (no throttle of the destination).
func TestRetryDelayOfAnAnswer(t *testing.T) {
	u := newUpstream(t)
	u.onUnary = func(g received) (otepv1.ResultCode, error) {
		if g.tag == "slow" {
			return otepv1.ResultCode_FailedRetryable, nil
		}
		return otepv1.ResultCode_Success, nil
	}
	u.unaryDelayMs = func(g received) uint64 {
		if g.tag == "slow" {
			return 3600 * 1000
		}
		return 0
	}
	cfg := unaryConfig(t, u.addr, ProtocolOTEP, 1)
	cfg.RetryMaxElapsed = 0
	cfg.WaitOnShutdown = false // the slow batch waits an hour: the cleanup drops it
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.admitTagged("slow")
	u.waitUntil("the slow batch answered", func() bool { return len(u.got) == 1 })
	f.admitTagged("b1")
	f.admitTagged("b2")
	if !f.wait(1) || !f.wait(2) {
		t.Fatal("the other batches were not delivered while one waits for its delay")
	}
	d.q.mu.Lock()
	heap := d.q.mu.sig[fastpath.Traces].delayed
	var due, taken int64
	if len(heap) == 1 {
		due, taken = heap[0].due, heap[0].taken
	}
	d.q.mu.Unlock()
	if len(heap) != 1 || time.Duration(due-taken) < time.Hour {
		t.Fatalf("%d requests waiting for a retry, due %v after it was taken; want the slow one, an hour later", len(heap), time.Duration(due-taken))
	}
	if n := value(d.m.throttles); n != 0 {
		t.Fatalf("the destination was throttled %d times for one request's delay", n)
	}
}

// admitTagged admits a one-entry trace batch tagged tag for the default tenant.
func (f *feeder) admitTagged(tag string) {
	f.t.Helper()
	body := traceBody(tag, 1, 10)
	b, err := f.p.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1})
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.batches = append(f.batches, b)
	f.bodies[tag] = body
	f.mu.Unlock()
}
