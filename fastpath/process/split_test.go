package process

import (
	"bytes"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// newRouter routes destination i by rules[i] ("" takes the rest), each a match value.
func newRouter(t testing.TB, rules ...string) *Router {
	t.Helper()
	var rs [][]Match
	for _, r := range rules {
		if r == "" {
			rs = append(rs, nil)
			continue
		}
		m, err := ParseRoute(r)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, m)
	}
	rt, err := NewRouter(rs)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

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

func splitPieces(t *testing.T, s *pipeline.Pieces, sig fastpath.Signal) []gotPiece {
	t.Helper()
	var out []gotPiece
	for j := range s.N {
		pc := s.P[j]
		names, items := services(t, sig, s.Buf[pc.Start:pc.End])
		if items != pc.Items {
			t.Errorf("piece %b holds %d items, counted %d", pc.Route, items, pc.Items)
		}
		out = append(out, gotPiece{pc.Route, names, pc.Items})
	}
	return out
}

// split is rt's Split of req, every destination a candidate.
func split(rt *Router, sig fastpath.Signal, req []byte, items int, layout fastpath.Layout) (*pipeline.Pieces, error) {
	p := pipeline.NewPieces(nil)
	if err := rt.Split(p, sig, req, items, layout, ^uint64(0)); err != nil {
		p.Release()
		return nil, err
	}
	return p, nil
}

// Every signal's request is split into one piece per route, in the order of the routes'
// first entries, each piece the request's entries of its route in their order, whole (pdata
// reads them back with every item), and counted.
func TestSplitRoutesSignals(t *testing.T) {
	rt := newRouter(t, "resource:service.name=checkout", "")
	for _, sig := range []fastpath.Signal{fastpath.Traces, fastpath.Metrics, fastpath.Logs} {
		req := routedRequest(t, sig, 3, "cart", "checkout", "payments", "checkout")
		s, err := split(rt, sig, req, 12, fastpath.LayoutV1)
		if err != nil {
			t.Fatal(err)
		}
		got := splitPieces(t, s, sig)
		want := []gotPiece{{0b10, []string{"cart", "payments"}, 6}, {0b01, []string{"checkout", "checkout"}, 6}}
		if s.One || len(got) != 2 || !samePiece(got[0], want[0]) || !samePiece(got[1], want[1]) {
			t.Errorf("%v: pieces %+v, want %+v", sig, got, want)
		}
		s.Release()
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
		s, err := split(rt, sig, routedRequest(t, sig, 2, "checkout", "cart"), 4, fastpath.LayoutV1)
		if err != nil {
			t.Fatal(err)
		}
		if !s.One || s.N != 1 || s.Buf != nil || s.P[0].Route != 0b01 {
			t.Errorf("%v: one way: %+v", sig, s)
		}
		s.Release()
		s, err = split(rt, sig, nil, 0, fastpath.LayoutV1)
		if err != nil || !s.One || s.N != 0 || s.Unrouted != 0 {
			t.Errorf("%v: empty request: %+v, %v", sig, s, err)
		}
		s.Release()
	}
	only := newRouter(t, "resource:service.name=checkout")
	s, err := split(only, fastpath.Metrics, routedRequest(t, fastpath.Metrics, 3, "cart", "payments"), 6, fastpath.LayoutV1)
	if err != nil || s.N != 0 || s.Unrouted != 2 || s.Lost != 6 {
		t.Errorf("unrouted: %+v, %v", s, err)
	}
	s.Release()
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
	s, err := split(rt, fastpath.Logs, otep, 3, fastpath.LayoutOTEP)
	if err != nil {
		t.Fatal(err)
	}
	got := splitPieces(t, s, fastpath.Logs)
	if len(got) != 2 || !samePiece(got[0], gotPiece{0b01, []string{"checkout"}, 1}) || !samePiece(got[1], gotPiece{0b10, []string{"cart"}, 2}) {
		t.Errorf("pieces %+v", got)
	}
	if s.Stripped != (fastpath.Stripped{Fields: 1, Bytes: 3}) {
		t.Errorf("stripped %+v", s.Stripped)
	}
	s.Release()
	// A malformed top level refuses the request.
	if _, err := split(rt, fastpath.Logs, append(slices.Clone(co), 0x0a, 0x7f), 1, fastpath.LayoutV1); err == nil {
		t.Error("a truncated entry was split")
	}
}

// A spooled record is filtered for each destination: it keeps the entries its destination
// takes, with their items, in order; all of them when it takes every one.
func TestRouterFilter(t *testing.T) {
	rt := newRouter(t, "resource:service.name=checkout", "")
	rec := routedRequest(t, fastpath.Metrics, 2, "checkout", "cart", "checkout")
	for _, c := range []struct {
		dest  int
		want  []string
		items int
	}{{0, []string{"checkout", "checkout"}, 4}, {1, []string{"cart"}, 2}} {
		out, items, err := rt.Filter(fastpath.Metrics, slices.Clone(rec), 6, c.dest, ^uint64(0))
		if err != nil {
			t.Fatal(err)
		}
		names, n := services(t, fastpath.Metrics, out)
		if !slices.Equal(names, c.want) || n != c.items || items != c.items {
			t.Errorf("dest %d: %q, %d items (said %d)", c.dest, names, n, items)
		}
	}
	all := routedRequest(t, fastpath.Metrics, 2, "cart", "payments")
	out, items, err := rt.Filter(fastpath.Metrics, slices.Clone(all), 4, 1, ^uint64(0))
	if err != nil || !bytes.Equal(out, all) || items != 4 {
		t.Errorf("every entry kept: %d bytes of %d, %d items, %v", len(out), len(all), items, err)
	}
	out, _, err = rt.Filter(fastpath.Metrics, slices.Clone(all), 4, 0, ^uint64(0))
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
		s, err := split(rt, sig, req, 0, fastpath.LayoutV1)
		if err != nil {
			return
		}
		defer s.Release()
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
		if s.One {
			if len(want) > 1 {
				t.Fatalf("one way, but the entries go %d ways", len(want))
			}
			return
		}
		if s.N != len(want) {
			t.Fatalf("%d pieces for %d routes", s.N, len(want))
		}
		for j := range s.N {
			pc := s.P[j]
			var got []string
			it := fastpath.NewTopLevel(s.Buf[pc.Start:pc.End])
			for fl, ok := it.Next(); ok; fl, ok = it.Next() {
				got = append(got, string(s.Buf[pc.Start+fl.Value:pc.Start+fl.End]))
			}
			if it.Err() != nil || !slices.Equal(got, want[pc.Route]) {
				t.Fatalf("piece %b: %d entries (%v), want %d", pc.Route, len(got), it.Err(), len(want[pc.Route]))
			}
		}
	})
}
