package process

import (
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

func TestParseRoute(t *testing.T) {
	f := func(in string, want []Match, wantErr string) {
		t.Helper()
		got, err := ParseRoute(in)
		switch {
		case wantErr != "" && (err == nil || !contains(err.Error(), wantErr)):
			t.Errorf("ParseRoute(%q) = %v, %v; want an error with %q", in, got, err, wantErr)
		case wantErr == "" && (err != nil || !slices.Equal(got, want)):
			t.Errorf("ParseRoute(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	f("resource:service.name=checkout", []Match{{Key: "service.name", Value: "checkout"}}, "")
	f("resource:service.name=check*|cart", []Match{{Key: "service.name", Value: "check", Prefix: true}, {Key: "service.name", Value: "cart"}}, "")
	f("resource:k8s.namespace.name=*", []Match{{Key: "k8s.namespace.name", Prefix: true}}, "")
	f("resource:a=", []Match{{Key: "a"}}, "")
	f("service.name=checkout", nil, "want resource:KEY=VALUE")
	f("resource:service.name", nil, "want resource:KEY=VALUE")
	f("resource:=x", nil, "want resource:KEY=VALUE")
	f("resource:a=b*c", nil, "'*' may only end a value")
	f(" ", nil, "want resource:KEY=VALUE")
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// resourceEntry is a ResourceSpans entry's value with the given attributes (key, value pairs;
// a value "#int" is an int attribute).
func resourceEntry(t *testing.T, kv ...string) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "#int" {
			rs.Resource().Attributes().PutInt(kv[i], 7)
		} else {
			rs.Resource().Attributes().PutStr(kv[i], kv[i+1])
		}
	}
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetSpanID(pcommon.SpanID{1})
	b := marshalTraces(t, td)
	_, _, n := protowire.ConsumeTag(b)
	v, m := protowire.ConsumeBytes(b[n:])
	if m < 0 {
		t.Fatal("no entry")
	}
	return v
}

// A destination with a rule takes what it matches; one without takes what no rule of the
// candidates matches; candidates limit both.
func TestRouterRoute(t *testing.T) {
	rule := func(s string) []Match {
		m, err := ParseRoute(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	r, err := NewRouter([][]Match{rule("resource:service.name=checkout"), rule("resource:service.name=cart|pay*"),
		rule("resource:env=prod"), nil})
	if err != nil {
		t.Fatal(err)
	}
	f := func(cand uint64, want uint64, kv ...string) {
		t.Helper()
		got, err := r.Route(fastpath.Traces, resourceEntry(t, kv...), cand)
		if err != nil || got != want {
			t.Errorf("%q among %b: %b, %v; want %b", kv, cand, got, err, want)
		}
	}
	all := ^uint64(0)
	f(all, 0b0001, "service.name", "checkout")
	f(all, 0b0010, "service.name", "payments")
	f(all, 0b0010, "service.name", "cart")
	f(all, 0b0101, "service.name", "checkout", "env", "prod")
	f(all, 0b1000, "service.name", "search")
	f(all, 0b1000)                                // no attributes at all
	f(all, 0b1000, "service.name", "#int")        // not a string
	f(all, 0b1000, "service.name", "cartx")       // exact, not a prefix
	f(0b1010, 0b1000, "service.name", "checkout") // checkout's destination is not a candidate
	f(0b0011, 0, "service.name", "search")        // no candidate takes the rest
	// The first attribute of a key decides, as for -drop.
	kv := func(k, v string) []byte {
		val := protowire.AppendBytes([]byte{0x0a}, []byte(v))
		b := protowire.AppendBytes([]byte{0x0a}, []byte(k))
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendBytes(b, val)
	}
	res := protowire.AppendBytes([]byte{0x0a}, kv("service.name", "x"))
	res = protowire.AppendTag(res, 1, protowire.BytesType)
	res = protowire.AppendBytes(res, kv("service.name", "cart"))
	if got, err := r.Route(fastpath.Traces, protowire.AppendBytes([]byte{0x0a}, res), all); got != 0b1000 || err != nil {
		t.Errorf("two service.name, the first x: %b, %v", got, err)
	}
	if _, err := r.Route(fastpath.Traces, []byte{0x0a, 0x05, 0x0a}, all); err == nil {
		t.Error("a malformed Resource was routed")
	}
	if n, err := r.Items(fastpath.Traces, resourceEntry(t, "a", "b")); n != 1 || err != nil {
		t.Errorf("items %d, %v", n, err)
	}
	for _, bad := range [][][]Match{
		{{}},
		{{{Key: "a", Value: "x"}, {Key: "b", Value: "y"}}},
		{{{Key: "", Value: "x"}}},
		make([][]Match, MaxRoutes+1),
	} {
		if _, err := NewRouter(bad); err == nil {
			t.Errorf("NewRouter(%v) accepted", bad)
		}
	}
}
