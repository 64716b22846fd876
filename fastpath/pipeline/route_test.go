package pipeline

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

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

// pieces returns the split's pieces by route: their services and items.
type gotPiece struct {
	route    uint64
	services []string
	items    int
}

func splitPieces(t *testing.T, s *routeSplitter, sig fastpath.Signal) []gotPiece {
	t.Helper()
	var out []gotPiece
	for j := range s.n {
		pc := s.pieces[j]
		names, items := services(t, sig, (*s.buf)[pc.start:pc.end])
		if items != pc.items {
			t.Errorf("piece %b holds %d items, counted %d", pc.route, items, pc.items)
		}
		out = append(out, gotPiece{pc.route, names, pc.items})
	}
	return out
}

// Every signal's request is split into one piece per route, in the order of the routes'
// first entries, each piece the request's entries of its route in their order, whole (pdata
// reads them back with every item), and counted.
func TestSplitRoutesSignals(t *testing.T) {
	rt := newRouter(t, "resource:service.name=checkout", "")
	for _, sig := range []fastpath.Signal{fastpath.Traces, fastpath.Metrics, fastpath.Logs} {
		req := routedRequest(t, sig, 3, "cart", "checkout", "payments", "checkout")
		s, err := splitRoutes(rt, nil, ^uint64(0), ^uint64(0), sig, req, 12, fastpath.LayoutV1)
		if err != nil {
			t.Fatal(err)
		}
		got := splitPieces(t, s, sig)
		want := []gotPiece{{0b10, []string{"cart", "payments"}, 6}, {0b01, []string{"checkout", "checkout"}, 6}}
		if s.one || len(got) != 2 || !samePiece(got[0], want[0]) || !samePiece(got[1], want[1]) {
			t.Errorf("%v: pieces %+v, want %+v", sig, got, want)
		}
		s.release()
	}
}

func samePiece(a, b gotPiece) bool {
	return a.route == b.route && a.items == b.items && slices.Equal(a.services, b.services)
}

// A request whose entries all go one way is not copied; an empty request has no piece and
// nothing unrouted; a request of unrouted entries only has no piece and counts what it left.
func TestSplitRoutesOneWay(t *testing.T) {
	rt := newRouter(t, "resource:service.name=checkout|cart", "")
	for _, sig := range []fastpath.Signal{fastpath.Traces, fastpath.Metrics, fastpath.Logs} {
		s, err := splitRoutes(rt, nil, ^uint64(0), ^uint64(0), sig, routedRequest(t, sig, 2, "checkout", "cart"), 4, fastpath.LayoutV1)
		if err != nil {
			t.Fatal(err)
		}
		if !s.one || s.n != 1 || s.buf != nil || s.pieces[0].route != 0b01 {
			t.Errorf("%v: one way: %+v", sig, s)
		}
		s.release()
		s, err = splitRoutes(rt, nil, ^uint64(0), ^uint64(0), sig, nil, 0, fastpath.LayoutV1)
		if err != nil || !s.one || s.n != 0 || s.unrouted != 0 {
			t.Errorf("%v: empty request: %+v, %v", sig, s, err)
		}
		s.release()
	}
	only := newRouter(t, "resource:service.name=checkout")
	s, err := splitRoutes(only, nil, ^uint64(0), ^uint64(0), fastpath.Metrics, routedRequest(t, fastpath.Metrics, 3, "cart", "payments"), 6, fastpath.LayoutV1)
	if err != nil || s.n != 0 || s.unrouted != 2 || s.lost != 6 {
		t.Errorf("unrouted: %+v, %v", s, err)
	}
	s.release()
}

// The encodings the top-level walk accepts: the OTEP layout (id at field 1, entries at field
// 2), top-level fields that are not entries (stripped, counted), a multi-byte tag and a length
// written in more bytes than it needs. A piece copies each entry's length as it came, under a
// v1 tag, and pdata reads it back.
func TestSplitRoutesEncodings(t *testing.T) {
	rt := newRouter(t, "resource:service.name=checkout", "")
	co := routedRequest(t, fastpath.Logs, 1, "checkout")
	cart := routedRequest(t, fastpath.Logs, 2, "cart")
	// Non-minimal: tag of field 2 in two bytes, length in three.
	long := func(num protowire.Number, e []byte) []byte {
		_, _, n := protowire.ConsumeTag(e)
		l, m := protowire.ConsumeVarint(e[n:])
		b := []byte{byte(num)<<3 | 2 | 0x80, 0x00}
		b = append(b, byte(l)|0x80, byte(l>>7)|0x80, byte(l>>14))
		return append(b, e[n+m:]...)
	}
	var otep []byte
	otep = protowire.AppendTag(otep, 1, protowire.VarintType)
	otep = protowire.AppendVarint(otep, 42)
	otep = append(otep, long(2, co)...)
	otep = append(otep, 0x3a, 0x01, 'x') // field 7: stripped
	otep = protowire.AppendTag(otep, 2, protowire.BytesType)
	otep = protowire.AppendBytes(otep, cart[2:]) // cart's entry: its one-byte tag and length off
	s, err := splitRoutes(rt, nil, ^uint64(0), ^uint64(0), fastpath.Logs, otep, 3, fastpath.LayoutOTEP)
	if err != nil {
		t.Fatal(err)
	}
	got := splitPieces(t, s, fastpath.Logs)
	if len(got) != 2 || !samePiece(got[0], gotPiece{0b01, []string{"checkout"}, 1}) || !samePiece(got[1], gotPiece{0b10, []string{"cart"}, 2}) {
		t.Errorf("pieces %+v", got)
	}
	if s.st != (fastpath.Stripped{Fields: 1, Bytes: 3}) {
		t.Errorf("stripped %+v", s.st)
	}
	s.release()
	// A malformed top level refuses the request.
	if _, err := splitRoutes(rt, nil, ^uint64(0), ^uint64(0), fastpath.Logs, append(slices.Clone(co), 0x0a, 0x7f), 1, fastpath.LayoutV1); err == nil {
		t.Error("a truncated entry was split")
	}
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

// A spooled record is filtered for each destination: it keeps the entries its destination
// takes, with their items, in order; all of them when it takes every one.
func TestFilterRoute(t *testing.T) {
	rt := newRouter(t, "resource:service.name=checkout", "")
	rec := routedRequest(t, fastpath.Metrics, 2, "checkout", "cart", "checkout")
	for _, c := range []struct {
		dest  int
		want  []string
		items int
	}{{0, []string{"checkout", "checkout"}, 4}, {1, []string{"cart"}, 2}} {
		out, items, err := FilterRoute(rt, ^uint64(0), fastpath.Metrics, c.dest, slices.Clone(rec), 6)
		if err != nil {
			t.Fatal(err)
		}
		names, n := services(t, fastpath.Metrics, out)
		if !slices.Equal(names, c.want) || n != c.items || items != c.items {
			t.Errorf("dest %d: %q, %d items (said %d)", c.dest, names, n, items)
		}
	}
	all := routedRequest(t, fastpath.Metrics, 2, "cart", "payments")
	out, items, err := FilterRoute(rt, ^uint64(0), fastpath.Metrics, 1, slices.Clone(all), 4)
	if err != nil || !bytes.Equal(out, all) || items != 4 {
		t.Errorf("every entry kept: %d bytes of %d, %d items, %v", len(out), len(all), items, err)
	}
	out, _, err = FilterRoute(rt, ^uint64(0), fastpath.Metrics, 0, slices.Clone(all), 4)
	if err != nil || len(out) != 0 {
		t.Errorf("no entry kept: %d bytes, %v", len(out), err)
	}
}

// FuzzSplitRoutes: any bytes either refuse or split into pieces whose every entry routes to
// its piece's route, together holding each routed entry of the request once, in order within
// its route.
func FuzzSplitRoutes(f *testing.F) {
	rt := newRouter(f, "resource:service.name=checkout", "resource:service.name=cart|pay*", "")
	for _, sig := range []fastpath.Signal{fastpath.Traces, fastpath.Metrics, fastpath.Logs} {
		f.Add(uint8(sig), routedRequest(f, sig, 2, "checkout", "cart", "search", "payments"))
		f.Add(uint8(sig), routedRequest(f, sig, 1, "checkout"))
	}
	f.Add(uint8(0), []byte{0x0a, 0x00, 0x12, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, sigByte uint8, req []byte) {
		sig := fastpath.Signal(sigByte % uint8(fastpath.NumSignals))
		s, err := splitRoutes(rt, nil, ^uint64(0), ^uint64(0), sig, req, 0, fastpath.LayoutV1)
		if err != nil {
			return
		}
		defer s.release()
		// The request's entries by route, in order.
		want := map[uint64][]string{}
		it := fastpath.NewTopLevel(req)
		for fl, ok := it.Next(); ok; fl, ok = it.Next() {
			if fl.Num != 1 {
				continue
			}
			route, err := rt.Route(sig, req[fl.Value:fl.End], rt.All())
			if err != nil {
				t.Fatalf("split, but routing an entry fails: %v", err)
			}
			if route != 0 {
				want[route] = append(want[route], string(req[fl.Value:fl.End]))
			}
		}
		if s.one {
			if len(want) > 1 {
				t.Fatalf("one way, but the entries go %d ways", len(want))
			}
			return
		}
		if s.n != len(want) {
			t.Fatalf("%d pieces for %d routes", s.n, len(want))
		}
		for j := range s.n {
			pc := s.pieces[j]
			var got []string
			it := fastpath.NewTopLevel((*s.buf)[pc.start:pc.end])
			for fl, ok := it.Next(); ok; fl, ok = it.Next() {
				got = append(got, string((*s.buf)[pc.start+fl.Value:pc.start+fl.End]))
			}
			if it.Err() != nil || !slices.Equal(got, want[pc.route]) {
				t.Fatalf("piece %b: %d entries (%v), want %d", pc.route, len(got), it.Err(), len(want[pc.route]))
			}
		}
	})
}
