package process

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

// benchRequest is a request shaped like the benchmarks' small batch: 100 spans with random
// trace ids and four attributes each, in resources of five attributes.
func benchRequest(tb testing.TB, resources int) []byte {
	td := ptrace.NewTraces()
	rnd := rand.New(rand.NewPCG(100, uint64(resources)))
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
			var tid pcommon.TraceID
			binary.LittleEndian.PutUint64(tid[:8], rnd.Uint64())
			binary.LittleEndian.PutUint64(tid[8:], rnd.Uint64())
			sp.SetTraceID(tid)
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

// benchLogs is 100 log records in two resources, four of five with a random trace id.
func benchLogs(tb testing.TB) []byte {
	ld := plog.NewLogs()
	rnd := rand.New(rand.NewPCG(100, 3))
	for r := range 2 {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", fmt.Sprint("svc-", r))
		sl := rl.ScopeLogs().AppendEmpty()
		for i := range 50 {
			lr := sl.LogRecords().AppendEmpty()
			lr.SetTimestamp(1700000000000000000)
			lr.Body().SetStr("GET /api/cart 200")
			lr.Attributes().PutStr("http.route", "/api/cart")
			if i%5 != 4 {
				var tid pcommon.TraceID
				binary.LittleEndian.PutUint64(tid[:8], rnd.Uint64())
				binary.LittleEndian.PutUint64(tid[8:], rnd.Uint64())
				lr.SetTraceID(tid)
			}
		}
	}
	return marshalLogs(tb, ld)
}

var stepConfigs = []struct {
	name string
	cfg  Config
}{
	{"resource_set", Config{Set: []Attr{{"k8s.node.name", "node-7"}, {"deployment.environment", "prod"}}}},
	{"resource_delete", Config{Delete: []string{"host.name"}}},
	{"drop_none", Config{Drop: []Match{{Key: "k8s.namespace.name", Value: "dev"}}}},
	{"drop_half", Config{Drop: []Match{{Key: "service.name", Value: "svc-1"}}}},
	{"sample_hash_seed_30", Config{Sample: SampleConfig{On: true, Percent: 30, HashSeed: 1}}},
	{"sample_proportional_30", Config{Sample: SampleConfig{On: true, Mode: SampleProportional, Percent: 30}}},
	{"sample_equalizing_30", Config{Sample: SampleConfig{On: true, Mode: SampleEqualizing, Percent: 30}}},
	{"from_peer_insert", Config{FromPeer: "k8s.pod.ip"}},
	{"from_peer_upsert", Config{FromPeer: "k8s.pod.ip", FromPeerAction: PeerUpsert}},
	{"all", Config{
		Set:      []Attr{{"k8s.node.name", "node-7"}, {"deployment.environment", "prod"}},
		Drop:     []Match{{Key: "k8s.namespace.name", Value: "dev"}},
		Sample:   SampleConfig{On: true, Percent: 30, HashSeed: 1},
		FromPeer: "k8s.pod.ip",
	}},
}

// benchPeer is the client address run gives every request.
var benchPeer = netip.MustParseAddr("10.42.7.19")

// run is apply without the test helper's checks, into dst, from benchPeer.
func run(c *Chain, sig fastpath.Signal, req, dst []byte) ([]byte, error) {
	return runFrom(c, sig, req, dst, benchPeer)
}

// runFrom is run from the client address peer.
func runFrom(c *Chain, sig fastpath.Signal, req, dst []byte, peer netip.Addr) ([]byte, error) {
	out := dst[:0]
	var sum Tally
	for off := 0; off < len(req); {
		f, err := next(req, off)
		if err != nil {
			return nil, err
		}
		off = f.end
		var t Tally
		if out, t, err = c.AppendEntry(out, sig, req[f.val:f.end], peer); err != nil {
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
// beside BenchmarkStep/copy, the copy admission makes of every request anyway. The
// sample_*_second_tier runs take what a first tier in the same mode at the same rate passed on,
// spans that carry the threshold it wrote: equalizing keeps them all as they came,
// proportional multiplies their probability again and rewrites the threshold of those it keeps.
func BenchmarkStep(b *testing.B) {
	req := benchRequest(b, 2)
	dst := make([]byte, 0, 3*len(req))
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
				if _, err := run(c, fastpath.Traces, req, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, mode := range []SampleMode{SampleProportional, SampleEqualizing} {
		c := mustChain(b, Config{Sample: SampleConfig{On: true, Mode: mode, Percent: 30}})
		tiered := tieredRequest(b, mode, 30)
		b.Run(fmt.Sprintf("sample_%v_30_second_tier", mode), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tiered)))
			for b.Loop() {
				if _, err := run(c, fastpath.Traces, tiered, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// tieredRequest is benchRequest as a tier sampling with mode at pct passes it on: the spans it
// keeps, each with the th it wrote. In equalizing mode, the same sampler keeps all of them as
// they are; in proportional mode, it multiplies their probability again.
func tieredRequest(tb testing.TB, mode SampleMode, pct float32) []byte {
	c := mustChain(tb, Config{Sample: SampleConfig{On: true, Mode: mode, Percent: pct}})
	req := benchRequest(tb, 2)
	out, err := run(c, fastpath.Traces, req, make([]byte, 0, 2*len(req)))
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
