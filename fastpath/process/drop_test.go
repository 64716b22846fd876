package process

import (
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

func TestParseDrop(t *testing.T) {
	f := func(in string, want Match, wantErr bool) {
		t.Helper()
		m, err := ParseDrop(in)
		if (err != nil) != wantErr || (!wantErr && m != want) {
			t.Errorf("ParseDrop(%q) = %+v, %v", in, m, err)
		}
	}
	f("resource:k8s.namespace.name=dev", Match{Key: "k8s.namespace.name", Value: "dev"}, false)
	f("resource:service.name=test-*", Match{Key: "service.name", Value: "test-", Prefix: true}, false)
	f("resource:a=", Match{Key: "a"}, false)
	f("resource:a=*", Match{Key: "a", Prefix: true}, false)
	f("resource:a=b=c", Match{Key: "a", Value: "b=c"}, false)
	f("span:a=b", Match{}, true)
	f("resource:=b", Match{}, true)
	f("resource:ab", Match{}, true)
	f("k8s.namespace.name=dev", Match{}, true)
}

func TestDropTraces(t *testing.T) {
	c := mustChain(t, Config{Drop: []Match{
		{Key: "k8s.namespace.name", Value: "dev"},
		{Key: "service.name", Value: "test-", Prefix: true},
	}})
	td := ptrace.NewTraces()
	add := func(ns, svc string, spans int) {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		if ns != "" {
			rs.Resource().Attributes().PutStr("k8s.namespace.name", ns)
		}
		s := rs.ScopeSpans().AppendEmpty()
		for range spans {
			s.Spans().AppendEmpty().SetName(svc)
		}
	}
	add("dev", "checkout", 2)  // dropped: namespace
	add("prod", "checkout", 3) // kept
	add("", "test-loadgen", 4) // dropped: prefix
	add("develop", "cart", 5)  // kept: exact match only
	add("prod", "tes", 6)      // kept: shorter than the prefix
	before := testutil.ToFloat64(droppedItemsC[fastpath.Traces])
	beforeRes := testutil.ToFloat64(droppedResourcesC[fastpath.Traces])
	out, removed := apply(t, c, fastpath.Traces, marshalTraces(t, td))
	if removed != 6 {
		t.Errorf("removed %d items, want 6", removed)
	}
	if d := testutil.ToFloat64(droppedItemsC[fastpath.Traces]) - before; d != 6 {
		t.Errorf("otlpgate_process_dropped_items_total{signal=traces} rose by %v, want 6", d)
	}
	if d := testutil.ToFloat64(droppedResourcesC[fastpath.Traces]) - beforeRes; d != 2 {
		t.Errorf("otlpgate_process_dropped_resources_total{signal=traces} rose by %v, want 2", d)
	}
	// What is left is exactly the other entries, byte for byte.
	want := ptrace.NewTraces()
	for _, i := range []int{1, 3, 4} {
		td.ResourceSpans().At(i).CopyTo(want.ResourceSpans().AppendEmpty())
	}
	if string(out) != string(marshalTraces(t, want)) {
		t.Error("output is not the request without the dropped entries")
	}
	got := unmarshalTraces(t, out)
	if got.SpanCount() != 14 {
		t.Errorf("%d spans", got.SpanCount())
	}
}

// A non-string attribute never matches; the first attribute of a key decides.
func TestDropValueTypes(t *testing.T) {
	c := mustChain(t, Config{Drop: []Match{{Key: "env", Value: "1"}}})
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutInt("env", 1)
	sum := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptySum()
	sum.DataPoints().AppendEmpty().SetIntValue(1)
	out, removed := apply(t, c, fastpath.Metrics, marshalMetrics(t, md))
	if removed != 0 || unmarshalMetrics(t, out).DataPointCount() != 1 {
		t.Errorf("an int attribute matched a string rule")
	}

	kv := func(k, v string) []byte { return encodeSet([]Attr{{k, v}}) }
	res := append(kv("env", "2"), kv("env", "1")...)
	entry := appendHeader(nil, 1, len(res))
	entry = append(entry, res...)
	if out, _, err := c.AppendEntry(nil, fastpath.Metrics, entry, netip.Addr{}); err != nil || len(out) == 0 {
		t.Errorf("the second attribute of a key decided: %x, %v", out, err)
	}
}

func TestDropCountsMetricPoints(t *testing.T) {
	c := mustChain(t, Config{Drop: []Match{{Key: "env", Value: "dev"}}})
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("env", "dev")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty().SetEmptyGauge()
	g.DataPoints().AppendEmpty()
	g.DataPoints().AppendEmpty()
	ms.AppendEmpty().SetEmptyHistogram().DataPoints().AppendEmpty()
	ms.AppendEmpty().SetEmptySummary().DataPoints().AppendEmpty()
	ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
	out, removed := apply(t, c, fastpath.Metrics, marshalMetrics(t, md))
	if len(out) != 0 || removed != 5 {
		t.Errorf("out %d bytes, removed %d, want 0 and 5", len(out), removed)
	}
}
