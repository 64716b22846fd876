package process

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// benchRequest is a request shaped like the benchmarks' small batch: one resource (five
// attributes), 100 spans with random trace ids and four attributes each.
func benchRequest(tb testing.TB, resources int) []byte {
	td := ptrace.NewTraces()
	for r := range resources {
		rs := td.ResourceSpans().AppendEmpty()
		a := rs.Resource().Attributes()
		a.PutStr("service.name", fmt.Sprint("svc-", r))
		a.PutStr("k8s.namespace.name", "prod")
		a.PutStr("k8s.pod.name", "checkout-7c9f")
		a.PutStr("host.name", "node-3")
		a.PutInt("process.pid", 4242)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("io.opentelemetry.http")
		for i := range 100 / resources {
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{byte(i), byte(i * 7), byte(i * 13), 4, 5, 6, 7, 8, byte(r), 10, 11, 12, 13, 14, 15, 16})
			sp.SetSpanID(pcommon.SpanID{byte(i), 2, 3, 4, 5, 6, 7, 8})
			sp.SetName("GET /api/cart")
			sp.SetStartTimestamp(1700000000000000000)
			sp.SetEndTimestamp(1700000000001000000)
			sp.Attributes().PutInt("http.status_code", 200)
			sp.Attributes().PutInt("net.peer.port", 443)
			sp.Attributes().PutStr("http.method", "GET")
			sp.Attributes().PutStr("http.route", "/api/cart")
		}
	}
	return marshalTraces(tb, td)
}

var stepConfigs = []struct {
	name string
	cfg  Config
}{
	{"resource_set", Config{Set: []Attr{{"k8s.node.name", "node-7"}, {"deployment.environment", "prod"}}}},
	{"resource_delete", Config{Delete: []string{"host.name"}}},
	{"drop_none", Config{Drop: []Match{{Key: "k8s.namespace.name", Value: "dev"}}}},
	{"drop_half", Config{Drop: []Match{{Key: "service.name", Value: "svc-1"}}}},
	{"sample_30", Config{Sample: SampleConfig{On: true, Percent: 30, HashSeed: 1}}},
	{"all", Config{
		Set:    []Attr{{"k8s.node.name", "node-7"}, {"deployment.environment", "prod"}},
		Drop:   []Match{{Key: "k8s.namespace.name", Value: "dev"}},
		Sample: SampleConfig{On: true, Percent: 30, HashSeed: 1},
	}},
}

// run is apply without the test helper's checks, into dst.
func run(c *Chain, sig int, req, dst []byte) ([]byte, error) {
	out := dst[:0]
	var sum Tally
	for off := 0; off < len(req); {
		f, err := next(req, off)
		if err != nil {
			return nil, err
		}
		off = f.end
		var t Tally
		if out, t, err = c.AppendEntry(out, sig, req[f.val:f.end]); err != nil {
			return nil, err
		}
		for i := range sum {
			sum[i] += t[i]
		}
	}
	c.Commit(sig, sum)
	return out, nil
}

// BenchmarkStep is the cost per request of each step (go test -bench Step ./process/),
// beside BenchmarkStep/copy, the copy admission makes of every request anyway.
func BenchmarkStep(b *testing.B) {
	req := benchRequest(b, 2)
	dst := make([]byte, 0, 2*len(req))
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(req)))
		for b.Loop() {
			dst = append(dst[:0], req...)
		}
	})
	for _, sc := range stepConfigs {
		c := mustChain(b, sc.cfg)
		b.Run(sc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				if _, err := run(c, sigTraces, req, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
