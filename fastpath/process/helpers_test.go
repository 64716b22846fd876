package process

import (
	"net/netip"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

// apply runs c on every entry of the v1 request body req, as fastpath's hook does, and
// returns the new body and the items removed.
func apply(t testing.TB, c *Chain, sig fastpath.Signal, req []byte) ([]byte, int) {
	t.Helper()
	return applyFrom(t, c, sig, req, netip.Addr{})
}

// applyFrom is apply for a request from the client address peer.
func applyFrom(t testing.TB, c *Chain, sig fastpath.Signal, req []byte, peer netip.Addr) ([]byte, int) {
	t.Helper()
	out := make([]byte, 0, len(req)+4096)
	var sum Tally
	for off := 0; off < len(req); {
		f, err := next(req, off)
		if err != nil {
			t.Fatal(err)
		}
		off = f.end
		if f.num != 1 {
			t.Fatalf("top-level field %d", f.num)
		}
		var tl Tally
		if out, tl, err = c.AppendEntry(out, sig, req[f.val:f.end], peer); err != nil {
			t.Fatal(err)
		}
		for i := range sum {
			sum[i] += tl[i]
		}
	}
	c.Commit(sig, sum)
	return out, int(sum[tRemoved])
}

func mustChain(t testing.TB, cfg Config) *Chain {
	t.Helper()
	c, err := New(cfg)
	if err != nil || c == nil {
		t.Fatalf("New: %v, %v", c, err)
	}
	return c
}

func marshalTraces(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unmarshalTraces(t testing.TB, b []byte) ptrace.Traces {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		t.Fatalf("the Collector's decoder refuses the output: %v", err)
	}
	return td
}

func marshalMetrics(t testing.TB, md pmetric.Metrics) []byte {
	t.Helper()
	b, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unmarshalMetrics(t testing.TB, b []byte) pmetric.Metrics {
	t.Helper()
	md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(b)
	if err != nil {
		t.Fatalf("the Collector's decoder refuses the output: %v", err)
	}
	return md
}

func marshalLogs(t testing.TB, ld plog.Logs) []byte {
	t.Helper()
	b, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unmarshalLogs(t testing.TB, b []byte) plog.Logs {
	t.Helper()
	ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b)
	if err != nil {
		t.Fatalf("the Collector's decoder refuses the output: %v", err)
	}
	return ld
}

// attrs returns a map as a Go map of strings (AsString of each value), failing on a
// repeated key.
func attrs(t testing.TB, m pcommon.Map) map[string]string {
	t.Helper()
	out := map[string]string{}
	seen := map[string]int{}
	m.Range(func(k string, v pcommon.Value) bool {
		seen[k]++
		out[k] = v.AsString()
		return true
	})
	for k, n := range seen {
		if n > 1 {
			t.Errorf("key %q appears %d times", k, n)
		}
	}
	return out
}
