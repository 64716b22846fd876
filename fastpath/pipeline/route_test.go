package pipeline

import (
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// routedRequest is a request of sig with one resource per service, each holding items items
// (a span, a gauge data point or a log record each) named after it.
func routedRequest(t testing.TB, sig fastpath.Signal, items int, services ...string) []byte {
	t.Helper()
	var b []byte
	var err error
	switch sig {
	case fastpath.Traces:
		td := ptrace.NewTraces()
		for _, s := range services {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", s)
			sps := rs.ScopeSpans().AppendEmpty().Spans()
			for i := range items {
				sp := sps.AppendEmpty()
				sp.SetName(s)
				sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
			}
		}
		b, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	case fastpath.Metrics:
		md := pmetric.NewMetrics()
		for _, s := range services {
			rm := md.ResourceMetrics().AppendEmpty()
			rm.Resource().Attributes().PutStr("service.name", s)
			m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
			m.SetName(s)
			dps := m.SetEmptyGauge().DataPoints()
			for i := range items {
				dps.AppendEmpty().SetIntValue(int64(i))
			}
		}
		b, err = (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	case fastpath.Logs:
		ld := plog.NewLogs()
		for _, s := range services {
			rl := ld.ResourceLogs().AppendEmpty()
			rl.Resource().Attributes().PutStr("service.name", s)
			lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
			for range items {
				lrs.AppendEmpty().Body().SetStr(s)
			}
		}
		b, err = (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// services decodes a v1 body of sig with pdata and returns the service.name of each resource
// with its item count, in order.
func services(t testing.TB, sig fastpath.Signal, b []byte) (names []string, items int) {
	t.Helper()
	add := func(r pcommon.Resource) {
		v, _ := r.Attributes().Get("service.name")
		names = append(names, v.Str())
	}
	switch sig {
	case fastpath.Traces:
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range td.ResourceSpans().All() {
			add(rs.Resource())
		}
		items = td.SpanCount()
	case fastpath.Metrics:
		md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, rm := range md.ResourceMetrics().All() {
			add(rm.Resource())
		}
		items = md.DataPointCount()
	case fastpath.Logs:
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, rl := range ld.ResourceLogs().All() {
			add(rl.Resource())
		}
		items = ld.LogRecordCount()
	}
	return names, items
}

// The pipeline hands each destination exactly the entries it takes, in batches of its route;
// the request is admitted whole or refused whole; the split and the unrouted entries are
// counted once admitted.
func TestPipelineRoutes(t *testing.T) {
	cfg := testConfig()
	cfg.Router = newRouter(t, "resource:service.name=checkout", "resource:service.name=cart", "")
	co, cart, rest := &recorder{name: "co", ok: true}, &recorder{name: "cart", ok: true}, &recorder{name: "rest", ok: true}
	p := newTestPipeline(t, cfg, co, cart, rest)
	splits := testutil.ToFloat64(routeSplit.WithLabelValues("traces"))
	req := routedRequest(t, fastpath.Traces, 2, "checkout", "cart", "payments", "checkout")
	if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: req, Items: 8}); err != nil {
		t.Fatal(err)
	}
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: routedRequest(t, fastpath.Traces, 1, "cart"), Items: 1}); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	check := func(r *recorder, want []string, items int) {
		t.Helper()
		var names []string
		n := 0
		for _, b := range r.batches() {
			got, its := services(t, fastpath.Traces, b.body)
			if its != b.items {
				t.Errorf("%s: batch of %d items says %d", r.name, its, b.items)
			}
			names = append(names, got...)
			n += its
		}
		if !slices.Equal(names, want) || n != items {
			t.Errorf("%s got %q (%d items), want %q (%d)", r.name, names, n, want, items)
		}
	}
	check(co, []string{"checkout", "checkout"}, 4)
	check(cart, []string{"cart", "cart"}, 3)
	check(rest, []string{"payments"}, 2)
	if got := testutil.ToFloat64(routeSplit.WithLabelValues("traces")) - splits; got != 1 {
		t.Errorf("split requests counted %v, want 1", got)
	}

	// Past the queue's bound the whole request is refused: no piece is admitted.
	cfg.QueueMaxBytes = int64(len(req) - 1)
	cfg.BatchMaxBytes = len(req) - 1
	small := &recorder{name: "small", ok: true}
	p2 := newTestPipeline(t, cfg, small, small, small)
	if _, err := p2.Admit(Request{Signal: fastpath.Traces, Body: req, Items: 8}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a request past the bound: %v", err)
	}
	cfg.QueueMaxBytes = int64(len(req) + 10)
	cfg.BatchMaxBytes = len(req)
	p3 := newTestPipeline(t, cfg, small, small, small)
	if _, err := p3.Admit(Request{Signal: fastpath.Traces, Body: req, Items: 8}); err != nil {
		t.Fatal(err)
	}
	if _, err := p3.Admit(Request{Signal: fastpath.Traces, Body: req, Items: 8}); !errors.Is(err, ErrFull) {
		t.Fatalf("a request past a full queue: %v", err)
	}
	if q := p3.QueuedBytes(); q != int64(len(req)) {
		t.Errorf("queued %d bytes, want the first request's %d: a refused request left a piece", q, len(req))
	}
	p3.Flush()
	if n := len(small.batches()); n != 3 {
		t.Errorf("%d batches, want the first request's 3 pieces", n)
	}

	// Routes number the destinations: the count must agree, and the set cannot change.
	if err := p.SetDestinations([]Destination{co, cart, rest}); !errors.Is(err, ErrTenantRoutes) {
		t.Errorf("SetDestinations with routes: %v", err)
	}
	if _, err := New(cfg, []Destination{co, cart}); err == nil {
		t.Error("three routes for two destinations")
	}

	// -ack=upstream has no single batch to wait on.
	cfg.Ack = AckUpstream
	if err := cfg.Validate(); err == nil {
		t.Error("Router with AckUpstream validated")
	}
}

// OTEP requests (the OTEP stream and unary intakes) are routed too: re-tagged to v1 whether
// they go one way (copied as they came, by AppendEntries) or are split.
func TestPipelineRoutesOTEP(t *testing.T) {
	cfg := testConfig()
	cfg.Router = newRouter(t, "resource:service.name=checkout", "")
	co, rest := &recorder{name: "co", ok: true}, &recorder{name: "rest", ok: true}
	p := newTestPipeline(t, cfg, co, rest)
	for _, svcs := range [][]string{{"checkout", "cart"}, {"cart", "search"}} {
		otep, _ := fastpath.AppendOTEP(nil, 9, routedRequest(t, fastpath.Logs, 1, svcs...))
		if _, err := p.Admit(Request{Signal: fastpath.Logs, Body: otep, Items: 2, Layout: fastpath.LayoutOTEP}); err != nil {
			t.Fatal(err)
		}
	}
	p.Flush()
	for _, c := range []struct {
		r    *recorder
		want []string
	}{{co, []string{"checkout"}}, {rest, []string{"cart", "cart", "search"}}} {
		var names []string
		for _, b := range c.r.batches() {
			got, n := services(t, fastpath.Logs, b.body)
			if n != b.items {
				t.Errorf("%s: %d records, said %d", c.r.name, n, b.items)
			}
			names = append(names, got...)
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("%s got %q, want %q", c.r.name, names, c.want)
		}
	}
}

// With tenants, a destination's rule and its match-header both hold: a tenant's entries go
// among its destinations only, and the rest is the rest of that tenant's destinations.
func TestPipelineRoutesWithTenants(t *testing.T) {
	ts := newTenants(t, tenant.Config{Headers: []string{"x-org"}, Max: 10, Routes: []tenant.Match{
		{Header: "x-org", Values: []string{"acme"}}, {Header: "x-org", Values: []string{"acme"}}, {Header: "x-org", Values: []string{"beta"}},
	}})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.Router = newRouter(t, "resource:service.name=checkout", "", "")
	acmeCo, acmeRest, beta := &recorder{name: "acme-co", ok: true}, &recorder{name: "acme-rest", ok: true}, &recorder{name: "beta", ok: true}
	p := newTestPipeline(t, cfg, acmeCo, acmeRest, beta)
	req := routedRequest(t, fastpath.Logs, 1, "checkout", "cart")
	if _, err := p.Admit(Request{Signal: fastpath.Logs, Origin: Origin{Tenant: mustLookup(t, ts, "acme")}, Body: req, Items: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Admit(Request{Signal: fastpath.Logs, Origin: Origin{Tenant: mustLookup(t, ts, "beta")}, Body: req, Items: 2}); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	for _, c := range []struct {
		r    *recorder
		want []string
	}{{acmeCo, []string{"checkout"}}, {acmeRest, []string{"cart"}}, {beta, []string{"checkout", "cart"}}} {
		var names []string
		for _, b := range c.r.batches() {
			got, _ := services(t, fastpath.Logs, b.body)
			names = append(names, got...)
			if want := map[*recorder]string{acmeCo: "acme", acmeRest: "acme", beta: "beta"}[c.r]; b.tenant != want {
				t.Errorf("%s: a batch of tenant %q", c.r.name, b.tenant)
			}
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("%s got %q, want %q", c.r.name, names, c.want)
		}
	}
}
