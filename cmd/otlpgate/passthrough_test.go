package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// sendSDKSpans sends n spans, one request each, gzip-compressed by the official OpenTelemetry
// Go SDK exporter, to the gateway's OTLP/HTTP intake at addr (or its gRPC intake, with grpc),
// and returns their span ids.
func sendSDKSpans(t *testing.T, addr string, grpc bool, n int) map[pcommon.SpanID]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var exp sdktrace.SpanExporter
	var err error
	if grpc {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(),
			otlptracegrpc.WithCompressor("gzip"))
	} else {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(),
			otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	}
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless(
		attribute.String("service.name", "checkout"))))
	ids := map[pcommon.SpanID]bool{}
	for i := range n {
		_, sp := tp.Tracer("t").Start(ctx, "op")
		sp.SetAttributes(attribute.Int("i", i))
		sp.End()
		ids[pcommon.SpanID(sp.SpanContext().SpanID())] = true
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// The real binary between the official SDK's gzip exporters (OTLP/HTTP and OTLP/gRPC) and a v1
// gRPC upstream that sends gzip (decoded by grpc-go's gzip and the Collector's pdata): every
// request passes through compressed, the upstream gets every span; with -resource.set the same
// requests are rewritten, so they go the plain way, with the attribute set on every span's
// resource; with -grpc.passthrough-encoding=none the gRPC intake keeps no compressed bytes.
func TestBinaryPassThroughGzip(t *testing.T) {
	bin := buildBinary(t)
	const n = 20
	for _, c := range []struct {
		name       string
		grpc       bool
		extra      []string
		compressed bool
		fallback   string
	}{
		{"http/passthrough", false, nil, true, ""},
		{"http/resource-set", false, []string{"-resource.set", "deployment.environment=prod"}, false, "processor"},
		{"grpc/passthrough", true, nil, true, ""},
		{"grpc/resource-set", true, []string{"-resource.set", "deployment.environment=prod"}, false, "processor"},
		{"grpc/encoding-none", true, []string{"-grpc.passthrough-encoding", "none"}, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := startUpstream(t)
			args := append([]string{"-batch.max-age", "10ms",
				"-dest", "name=up,endpoint=" + up.Addr() + ",protocol=v1,mode=unary,compression=gzip,retry-initial=20ms"}, c.extra...)
			g := startGateway(t, bin, args...)
			addr := g.http
			if c.grpc {
				addr = g.grpcAddr
			}
			waitReady(t, g)
			ids := sendSDKSpans(t, addr, c.grpc, n)
			testkit.WaitFor(t, "every span upstream", func() bool { return len(up.Spans()) >= n })
			got := up.Spans()
			for id := range ids {
				if got[id] != 1 {
					t.Fatalf("span %v arrived %d times; %d spans upstream", id, got[id], len(got))
				}
			}
			if len(got) != n || up.Refused(0) != 0 {
				t.Fatalf("%d spans upstream (%d calls refused), want %d", len(got), up.Refused(0), n)
			}
			compressed := scrape(t, g.admin, "otlpgate_fastpath_passthrough_requests_total", `way="compressed"`)
			plain := scrape(t, g.admin, "otlpgate_fastpath_passthrough_requests_total", `way="plain"`)
			batches := scrape(t, g.admin, "otlpgate_fastpath_passthrough_batches_total", `way="compressed"`)
			if c.compressed {
				if compressed != n || plain != 0 || batches < 1 {
					t.Fatalf("requests compressed %v, plain %v, compressed batches %v; want %d, 0, at least 1", compressed, plain, batches, n)
				}
				return
			}
			if c.fallback == "" {
				// Decompressed by gRPC before the intake saw it: never a compressed request.
				if compressed != 0 || plain != 0 || batches != 0 {
					t.Fatalf("requests compressed %v, plain %v, compressed batches %v; want none counted", compressed, plain, batches)
				}
				return
			}
			if fb := scrape(t, g.admin, "otlpgate_fastpath_passthrough_fallback_requests_total", `reason="`+c.fallback+`"`); compressed != 0 || plain != n || batches != 0 || fb != n {
				t.Fatalf("requests compressed %v, plain %v (%s %v), compressed batches %v; want 0, %d (%d), 0", compressed, plain, c.fallback, fb, batches, n, n)
			}
			for _, td := range up.Traces() {
				for i := range td.ResourceSpans().Len() {
					if v, _ := td.ResourceSpans().At(i).Resource().Attributes().Get("deployment.environment"); v.Str() != "prod" {
						t.Fatalf("a resource without the attribute -resource.set sets: %v", td.ResourceSpans().At(i).Resource().Attributes().AsRaw())
					}
				}
			}
		})
	}
}

// collectorHTTPUpstream is an OTLP/HTTP upstream built by the Collector's confighttp (its
// decompression) that decodes trace requests with pdata and records their span ids. Like the
// Collector's receiver it serves /v1/traces only: any other path is 404.
type collectorHTTPUpstream struct {
	url string
	mu  sync.Mutex
	ids map[pcommon.SpanID]int
	bad int
	// down answers every request 503, as an upstream that is away, while set.
	down atomic.Bool
}

func startCollectorHTTP(t *testing.T) *collectorHTTPUpstream {
	t.Helper()
	u := &collectorHTTPUpstream{ids: map[pcommon.SpanID]int{}}
	addr := strictsink.ServeCollectorHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if u.down.Load() {
			http.Error(w, "away", http.StatusServiceUnavailable)
			return
		}
		req := ptraceotlp.NewExportRequest()
		if err == nil {
			err = req.UnmarshalProto(body)
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		if err != nil {
			u.bad++
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rss := req.Traces().ResourceSpans()
		for i := range rss.Len() {
			sss := rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				for k := range sss.At(j).Spans().Len() {
					u.ids[sss.At(j).Spans().At(k).SpanID()]++
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		resp, _ := ptraceotlp.NewExportResponse().MarshalProto()
		w.Write(resp)
	}))
	u.url = "http://" + addr
	return u
}

func (u *collectorHTTPUpstream) spans() (map[pcommon.SpanID]int, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[pcommon.SpanID]int, len(u.ids))
	for k, v := range u.ids {
		out[k] = v
	}
	return out, u.bad
}

// sendZstdSpans sends n OTLP/HTTP protobuf requests of one span each to httpAddr, each one
// zstd frame as the Collector's exporter sends, their span ids starting with tag, and returns
// the span ids. Every request must be answered 200.
func sendZstdSpans(t *testing.T, httpAddr string, tag byte, n int) map[pcommon.SpanID]bool {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	want := map[pcommon.SpanID]bool{}
	for i := range n {
		td := ptrace.NewTraces()
		sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("op")
		sp.SetTraceID(pcommon.TraceID{0xbb, tag, byte(i)})
		sp.SetSpanID(pcommon.SpanID{0xcc, tag, byte(i)})
		want[sp.SpanID()] = true
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/v1/traces", bytes.NewReader(enc.EncodeAll(body, nil)))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "zstd")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	return want
}

// The real binary between zstd-compressed OTLP/HTTP requests (one zstd frame each, as the
// Collector's exporter sends) and an OTLP/HTTP upstream that sends zstd, built with the
// Collector's confighttp and decoding with its pdata: every request passes through
// compressed and every span arrives once.
func TestBinaryPassThroughZstd(t *testing.T) {
	bin := buildBinary(t)
	up := startCollectorHTTP(t)
	g := startGateway(t, bin, "-batch.max-age", "10ms",
		"-dest", "name=up,endpoint="+up.url+",protocol=http,compression=zstd,retry-initial=20ms")
	waitReady(t, g)
	const n = 20
	want := sendZstdSpans(t, g.http, 0, n)
	testkit.WaitFor(t, "every span upstream", func() bool { got, _ := up.spans(); return len(got) >= n })
	got, bad := up.spans()
	for id := range want {
		if got[id] != 1 {
			t.Fatalf("span %v arrived %d times", id, got[id])
		}
	}
	if len(got) != n || bad != 0 {
		t.Fatalf("%d spans upstream, %d requests refused; want %d, 0", len(got), bad, n)
	}
	if c, b := scrape(t, g.admin, "otlpgate_fastpath_passthrough_requests_total", `way="compressed"`),
		scrape(t, g.admin, "otlpgate_fastpath_passthrough_batches_total", `way="compressed"`); c != n || b < 1 {
		t.Fatalf("%v requests and %v batches went compressed; want %d and at least 1", c, b, n)
	}
}

// startTenantCollectorHTTP is a tenant sink serving OTLP/HTTP behind the Collector's
// confighttp, which decompresses what it is sent as the Collector does.
func startTenantCollectorHTTP(t *testing.T) *tenantSink {
	t.Helper()
	s := &tenantSink{}
	s.addr = strictsink.ServeCollectorHTTP(t, http.HandlerFunc(s.serveHTTP))
	return s
}

// sendGzipTenants sends n spans as each of tenants, one gzip OTLP/HTTP request per span, by
// the official OpenTelemetry Go SDK exporter naming its tenant in X-Scope-OrgID, the tenants'
// exporters at once so that their requests interleave at the gateway. It returns the tenant
// of every span id sent.
func sendGzipTenants(t *testing.T, httpAddr string, n int, tenants ...string) map[pcommon.SpanID]string {
	return sendGzipTenantsOver(t, httpAddr, false, n, tenants...)
}

// sendGzipTenantsOver is sendGzipTenants over OTLP/HTTP, or over OTLP/gRPC (the tenant as
// metadata) with grpc.
func sendGzipTenantsOver(t *testing.T, addr string, grpc bool, n int, tenants ...string) map[pcommon.SpanID]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner := map[pcommon.SpanID]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(tenants))
	for _, tn := range tenants {
		var exp sdktrace.SpanExporter
		var err error
		if grpc {
			exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(),
				otlptracegrpc.WithCompressor("gzip"), otlptracegrpc.WithHeaders(map[string]string{"x-scope-orgid": tn}))
		} else {
			exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(),
				otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
				otlptracehttp.WithHeaders(map[string]string{"X-Scope-OrgID": tn}))
		}
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless(
				attribute.String("service.name", tn))))
			defer func() { errs <- tp.Shutdown(ctx) }()
			for i := range n {
				_, sp := tp.Tracer("t").Start(ctx, "op")
				sp.SetAttributes(attribute.Int("i", i))
				sp.End()
				mu.Lock()
				owner[pcommon.SpanID(sp.SpanContext().SpanID())] = tn
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(owner) != n*len(tenants) {
		t.Fatalf("%d distinct span ids for %d spans", len(owner), n*len(tenants))
	}
	return owner
}

// Two tenants' gzip requests from the official SDK exporters, OTLP/HTTP and OTLP/gRPC (X-Scope-OrgID by WithHeaders)
// through the real binary to an OTLP/HTTP upstream per tenant (match-header), each sending
// gzip and forwarding the header, built with the Collector's confighttp and decoding with its
// pdata: every request passes through compressed, into batches of its own tenant, and each
// upstream gets exactly its tenant's spans, each once, every request with the header of the
// tenant whose spans it holds. The same with the spool: each request is spooled as it arrived,
// with its tenant, and each tenant's records leave in pass-through batches of their own.
func TestBinaryPassThroughTenants(t *testing.T) {
	bin := buildBinary(t)
	for _, spooled := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "spool"}[spooled], func(t *testing.T) {
			var extra []string
			if spooled {
				extra = []string{"-spool.dir", t.TempDir()}
			}
			passThroughTenants(t, bin, extra...)
		})
	}
}

func passThroughTenants(t *testing.T, bin string, extra ...string) {
	const n = 30
	acme, beta := startTenantCollectorHTTP(t), startTenantCollectorHTTP(t)
	dest := func(tenant, addr string) string {
		return "name=" + tenant + ",endpoint=http://" + addr + ",protocol=http,compression=gzip,retry-initial=20ms,retry-max=200ms" +
			",match-header=x-scope-orgid:" + tenant + ",forward-headers=x-scope-orgid"
	}
	g := startGateway(t, bin, append([]string{"-batch.max-age", "20ms", "-intake.headers", "X-Scope-OrgID",
		"-dest", dest("acme", acme.addr), "-dest", dest("beta", beta.addr)}, extra...)...)
	waitReady(t, g)
	owner := sendGzipTenants(t, g.http, n, "acme", "beta")
	// The same over OTLP/gRPC: the gRPC intake keeps gzip requests' bytes too.
	for id, tn := range sendGzipTenantsOver(t, g.grpcAddr, true, n, "acme", "beta") {
		owner[id] = tn
	}
	waitSpans(t, g, len(owner), acme, beta)
	checkSink(t, owner, "acme", acme, "acme")
	checkSink(t, owner, "beta", beta, "beta")
	compressed := scrape(t, g.admin, "otlpgate_fastpath_passthrough_requests_total", `way="compressed"`)
	plain := scrape(t, g.admin, "otlpgate_fastpath_passthrough_requests_total", `way="plain"`)
	fell := scrape(t, g.admin, "otlpgate_fastpath_passthrough_fallback_requests_total")
	batches := scrape(t, g.admin, "otlpgate_fastpath_passthrough_batches_total", `way="compressed"`)
	if compressed != 4*n || plain != 0 || fell != 0 || batches < 2 {
		t.Fatalf("requests compressed %v, plain %v (fallbacks %v), compressed batches %v; want %d, 0 (0), at least 2",
			compressed, plain, fell, batches, 4*n)
	}
}

// With the spool, requests that arrived compressed are spooled as they arrived and pass
// through, across a kill -9, to a strict upstream (the Collector's confighttp decompressing,
// its pdata decoding): gzip from the official SDK's OTLP/HTTP exporter, zstd as the
// Collector's exporter sends. While the upstream answers 503 the gateway acknowledges 20
// requests, all kept compressed, and is killed; the next start sends the same compression and
// hands them on as spooled, several to a batch, and every span arrives once; it stops cleanly.
// Then, with the upstream away again, 20 more are acknowledged and the gateway killed; the
// start after that sends the other compression, and inflates the 20 records, which arrive once
// each.
func TestBinarySpoolPassThrough(t *testing.T) {
	bin := buildBinary(t)
	const n = 20
	for _, c := range []struct{ enc, other string }{{"gzip", "zstd"}, {"zstd", "gzip"}} {
		t.Run(c.enc, func(t *testing.T) {
			up := startCollectorHTTP(t)
			up.down.Store(true)
			dir := t.TempDir()
			start := func(compression string) *gateway {
				g := startGateway(t, bin, "-spool.dir", dir, "-batch.max-age", "10ms",
					"-dest", "name=up,endpoint="+up.url+",protocol=http,compression="+compression+",retry-initial=20ms,retry-max=100ms")
				waitReady(t, g)
				return g
			}
			send := func(g *gateway, tag byte) map[pcommon.SpanID]bool {
				if c.enc == "zstd" {
					return sendZstdSpans(t, g.http, tag, n)
				}
				return sendSDKSpans(t, g.http, false, n)
			}
			counters := func(g *gateway) (compressed, fallback, batches, inflated float64) {
				return scrape(t, g.admin, "otlpgate_fastpath_passthrough_requests_total", `way="compressed"`),
					scrape(t, g.admin, "otlpgate_fastpath_passthrough_requests_total", `way="plain"`),
					scrape(t, g.admin, "otlpgate_fastpath_passthrough_batches_total", `way="compressed"`),
					scrape(t, g.admin, "otlpgate_spool_inflated_records_total")
			}
			want := map[pcommon.SpanID]bool{}
			delivered := func(what string) {
				t.Helper()
				testkit.WaitFor(t, what, func() bool { got, _ := up.spans(); return len(got) >= len(want) })
				got, bad := up.spans()
				for id := range want {
					if got[id] != 1 {
						t.Fatalf("%s: span %v arrived %d times", what, id, got[id])
					}
				}
				if len(got) != len(want) || bad != 0 {
					t.Fatalf("%s: %d spans upstream, %d requests it could not decode; want %d, 0", what, len(got), bad, len(want))
				}
			}

			g := start(c.enc)
			maps.Copy(want, send(g, 1))
			if comp, plain, _, _ := counters(g); comp != n || plain != 0 {
				t.Fatalf("acknowledged while the upstream is away: %v kept compressed, %v plain; want %d, 0", comp, plain, n)
			}
			kill9(t, g)

			up.down.Store(false)
			g = start(c.enc)
			delivered("the records of the killed gateway, as spooled")
			if _, _, batches, inflated := counters(g); batches < 1 || batches >= n || inflated != 0 {
				t.Fatalf("%v compressed batches (want 1 to %d: several records each), %v records inflated (want 0)", batches, n-1, inflated)
			}

			g.terminate(t) // a clean stop: nothing delivered is replayed

			up.down.Store(true)
			g = start(c.enc)
			maps.Copy(want, send(g, 2))
			if comp, plain, _, _ := counters(g); comp != n || plain != 0 {
				t.Fatalf("acknowledged while the upstream is away again: %v kept compressed, %v plain; want %d, 0", comp, plain, n)
			}
			kill9(t, g)

			up.down.Store(false)
			g = start(c.other)
			delivered("records inflated for a destination that sends " + c.other)
			if _, _, batches, inflated := counters(g); batches != 0 || inflated != n {
				t.Fatalf("%v compressed batches, %v records inflated; want 0, %d", batches, inflated, n)
			}
			g.terminate(t)
		})
	}
}
