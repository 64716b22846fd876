package process

import (
	"maps"
	"net/netip"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

var editCfg = Config{
	Set:    []Attr{{"k8s.node.name", "node-7"}, {"deployment.environment", "prod"}},
	Delete: []string{"secret.token"},
}

// tracesWithResources builds three resource entries: one whose attributes collide with the
// edits, one that does not, and one without a Resource field at all (pdata leaves an empty
// Resource out of the wire).
func tracesWithResources() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	a := rs.Resource().Attributes()
	a.PutStr("service.name", "checkout")
	a.PutStr("k8s.node.name", "stale")
	a.PutStr("secret.token", "hunter2")
	a.PutInt("pid", 42)
	rs.Resource().SetDroppedAttributesCount(3)
	rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.21.0")
	s := rs.ScopeSpans().AppendEmpty()
	s.Scope().SetName("lib")
	for i := range 3 {
		sp := s.Spans().AppendEmpty()
		sp.SetName("op")
		sp.SetTraceID(pcommon.TraceID{byte(i + 1), 1})
		sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
		sp.Attributes().PutStr("http.method", "GET")
	}
	rs2 := td.ResourceSpans().AppendEmpty()
	rs2.Resource().Attributes().PutStr("service.name", "cart")
	rs2.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("other")
	rs3 := td.ResourceSpans().AppendEmpty()
	rs3.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("bare")
	return td
}

func TestResourceEditTraces(t *testing.T) {
	c := mustChain(t, editCfg)
	in := tracesWithResources()
	out, removed := apply(t, c, fastpath.Traces, marshalTraces(t, in))
	if removed != 0 {
		t.Errorf("removed %d", removed)
	}
	got := unmarshalTraces(t, out)
	want := []map[string]string{
		{"service.name": "checkout", "pid": "42", "k8s.node.name": "node-7", "deployment.environment": "prod"},
		{"service.name": "cart", "k8s.node.name": "node-7", "deployment.environment": "prod"},
		{"k8s.node.name": "node-7", "deployment.environment": "prod"},
	}
	if n := got.ResourceSpans().Len(); n != len(want) {
		t.Fatalf("%d resources, want %d", n, len(want))
	}
	for i, w := range want {
		rs := got.ResourceSpans().At(i)
		if a := attrs(t, rs.Resource().Attributes()); !maps.Equal(a, w) {
			t.Errorf("resource %d: %v, want %v", i, a, w)
		}
		// Everything but the attributes is as it was.
		orig := in.ResourceSpans().At(i)
		if rs.SchemaUrl() != orig.SchemaUrl() || rs.Resource().DroppedAttributesCount() != orig.Resource().DroppedAttributesCount() {
			t.Errorf("resource %d: schema or dropped count changed", i)
		}
		o := ptrace.NewTraces()
		orig.ScopeSpans().CopyTo(o.ResourceSpans().AppendEmpty().ScopeSpans())
		g := ptrace.NewTraces()
		rs.ScopeSpans().CopyTo(g.ResourceSpans().AppendEmpty().ScopeSpans())
		if string(marshalTraces(t, o)) != string(marshalTraces(t, g)) {
			t.Errorf("resource %d: spans changed", i)
		}
	}
	// The set attributes keep their order, after the ones kept.
	keys := []string{}
	got.ResourceSpans().At(0).Resource().Attributes().Range(func(k string, _ pcommon.Value) bool {
		keys = append(keys, k)
		return true
	})
	if w := []string{"service.name", "pid", "k8s.node.name", "deployment.environment"}; !equalStrings(keys, w) {
		t.Errorf("keys %v, want %v", keys, w)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestResourceEditMetricsAndLogs(t *testing.T) {
	c := mustChain(t, editCfg)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("secret.token", "x")
	rm.Resource().Attributes().PutStr("host.name", "h")
	g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("cpu")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(0.5)
	out, _ := apply(t, c, fastpath.Metrics, marshalMetrics(t, md))
	gm := unmarshalMetrics(t, out)
	if a := attrs(t, gm.ResourceMetrics().At(0).Resource().Attributes()); !maps.Equal(a, map[string]string{"host.name": "h", "k8s.node.name": "node-7", "deployment.environment": "prod"}) {
		t.Errorf("metrics resource %v", a)
	}
	if v := gm.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).DoubleValue(); v != 0.5 {
		t.Errorf("point %v", v)
	}

	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("deployment.environment", "dev")
	rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("hello")
	out, _ = apply(t, c, fastpath.Logs, marshalLogs(t, ld))
	gl := unmarshalLogs(t, out)
	if a := attrs(t, gl.ResourceLogs().At(0).Resource().Attributes()); !maps.Equal(a, map[string]string{"k8s.node.name": "node-7", "deployment.environment": "prod"}) {
		t.Errorf("logs resource %v", a)
	}
	if b := gl.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body().Str(); b != "hello" {
		t.Errorf("body %q", b)
	}
}

// Deleting alone leaves resources without the key as they are, byte for byte.
func TestResourceDeleteOnly(t *testing.T) {
	c := mustChain(t, Config{Delete: []string{"secret.token"}})
	in := tracesWithResources()
	out, _ := apply(t, c, fastpath.Traces, marshalTraces(t, in))
	got := unmarshalTraces(t, out)
	if a := attrs(t, got.ResourceSpans().At(0).Resource().Attributes()); !maps.Equal(a, map[string]string{"service.name": "checkout", "k8s.node.name": "stale", "pid": "42"}) {
		t.Errorf("resource 0: %v", a)
	}
	in.ResourceSpans().At(0).Resource().Attributes().Remove("secret.token")
	if string(out) != string(marshalTraces(t, in)) {
		t.Error("output differs from the Collector's encoding of the same data")
	}
}

// A key repeated in the input, once set, appears once.
func TestResourceEditDuplicateKeys(t *testing.T) {
	c := mustChain(t, Config{Set: []Attr{{"team", "a"}}})
	kv := func(k, v string) []byte { return encodeSet([]Attr{{k, v}}) }
	res := append(append(kv("team", "x"), kv("team", "y")...), kv("host", "h")...)
	entry := appendHeader(nil, 1, len(res))
	entry = append(entry, res...)
	out, _, err := c.AppendEntry(nil, fastpath.Logs, entry, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	ld := unmarshalLogs(t, out)
	if a := attrs(t, ld.ResourceLogs().At(0).Resource().Attributes()); !maps.Equal(a, map[string]string{"team": "a", "host": "h"}) {
		t.Errorf("%v", a)
	}
}

func TestResourceEditRefusesMalformed(t *testing.T) {
	c := mustChain(t, editCfg)
	for _, e := range [][]byte{
		{0x0a, 0x05, 0x0a},                   // Resource longer than the entry
		{0x08, 0x01},                         // Resource as a varint
		{0x0a, 0x02, 0x0a, 0x09},             // attribute longer than the Resource
		{0x0a, 0x02, 0x08, 0x01, 0x12, 0x01}, // a scope length past the end
	} {
		if _, _, err := c.AppendEntry(nil, fastpath.Traces, e, netip.Addr{}); err == nil {
			t.Errorf("% x: no error", e)
		}
	}
}
