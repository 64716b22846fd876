package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// tenantCall is one upstream request a tenant sink received: the forwarded X-Scope-OrgID
// ("<none>" without one) and the span ids it held.
type tenantCall struct {
	org   string
	spans []pcommon.SpanID
}

// tenantSink is an upstream that records, per request, the forwarded header and the span
// ids, read with the Collector's own pdata decoder: over OTLP/gRPC (v1 Export) or OTLP/HTTP.
type tenantSink struct {
	ptraceotlp.UnimplementedGRPCServer
	addr  string
	mu    sync.Mutex
	calls []tenantCall
}

func (s *tenantSink) record(org string, req ptraceotlp.ExportRequest) {
	c := tenantCall{org: org}
	rss := req.Traces().ResourceSpans()
	for i := range rss.Len() {
		for j := range rss.At(i).ScopeSpans().Len() {
			sps := rss.At(i).ScopeSpans().At(j).Spans()
			for k := range sps.Len() {
				c.spans = append(c.spans, sps.At(k).SpanID())
			}
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *tenantSink) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	org := "<none>"
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-scope-orgid")) > 0 {
		org = strings.Join(md.Get("x-scope-orgid"), ",")
	}
	s.record(org, req)
	return ptraceotlp.NewExportResponse(), nil
}

// startTenantSink serves OTLP/gRPC, or OTLP/HTTP with asHTTP, on addr ("": a free port).
func startTenantSink(t *testing.T, addr string, asHTTP bool) *tenantSink {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &tenantSink{addr: ln.Addr().String()}
	if !asHTTP {
		srv := grpc.NewServer()
		ptraceotlp.RegisterGRPCServer(srv, s)
		go srv.Serve(ln)
		t.Cleanup(srv.Stop)
		return s
	}
	hs := &http.Server{Handler: http.HandlerFunc(s.serveHTTP)}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return s
}

// serveHTTP answers an OTLP/HTTP trace request, recording it.
func (s *tenantSink) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req := ptraceotlp.NewExportRequest()
	if err == nil {
		err = req.UnmarshalProto(body)
	}
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	org := "<none>"
	if vs := r.Header.Values("X-Scope-OrgID"); len(vs) > 0 {
		org = strings.Join(vs, ",")
	}
	s.record(org, req)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// byTenant returns the span ids the sink received for each forwarded header value, failing
// when a request held spans of a tenant other than the one its header names.
func (s *tenantSink) byTenant(t *testing.T, owner map[pcommon.SpanID]string) map[string][]pcommon.SpanID {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	got := map[string][]pcommon.SpanID{}
	for i, c := range s.calls {
		for _, id := range c.spans {
			if owner[id] != c.org {
				t.Fatalf("request %d with X-Scope-OrgID %q holds span %s of tenant %q", i, c.org, id, owner[id])
			}
		}
		got[c.org] = append(got[c.org], c.spans...)
	}
	return got
}

func (s *tenantSink) spanCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += len(c.spans)
	}
	return n
}

// sendTenants sends spans as two tenants, acme and beta, through the official OpenTelemetry
// Go SDK over both of the gateway's intakes, the four exporters at once: acme names its
// header with the exporters' WithHeaders option, beta with OTEL_EXPORTER_OTLP_HEADERS. It
// returns the tenant of every span id sent.
func sendTenants(t *testing.T, grpcAddr, httpAddr string, perExporter int) map[pcommon.SpanID]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-Scope-OrgID=beta")
	acme := map[string]string{"X-Scope-OrgID": "acme"}
	var exps []struct {
		tenant string
		exp    sdktrace.SpanExporter
	}
	add := func(tenant string, exp sdktrace.SpanExporter, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		exps = append(exps, struct {
			tenant string
			exp    sdktrace.SpanExporter
		}{tenant, exp})
	}
	g, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(grpcAddr), otlptracegrpc.WithInsecure(), otlptracegrpc.WithHeaders(acme))
	add("acme", g, err)
	g, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(grpcAddr), otlptracegrpc.WithInsecure())
	add("beta", g, err)
	h, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(httpAddr), otlptracehttp.WithInsecure(), otlptracehttp.WithHeaders(acme))
	add("acme", h, err)
	h, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(httpAddr), otlptracehttp.WithInsecure())
	add("beta", h, err)

	owner := map[pcommon.SpanID]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(exps))
	for i, e := range exps {
		wg.Go(func() {
			// A syncer sends each span as its own request as it ends: the four exporters'
			// requests interleave at the gateway, and its batches would mix them if keyed
			// by signal alone. Export errors reach the SDK's error handler, not End, so the
			// sinks' counts are what proves delivery.
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(e.exp))
			defer func() { errs <- tp.Shutdown(ctx) }()
			tr := tp.Tracer("tenants")
			for j := range perExporter {
				_, sp := tr.Start(ctx, fmt.Sprintf("%s-%d-%d", e.tenant, i, j))
				sp.End()
				mu.Lock()
				owner[pcommon.SpanID(sp.SpanContext().SpanID())] = e.tenant
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
	if len(owner) != len(exps)*perExporter {
		t.Fatalf("%d distinct span ids for %d spans", len(owner), len(exps)*perExporter)
	}
	return owner
}

// waitSpans waits (boundedly) until the sinks hold want spans between them.
func waitSpans(t *testing.T, g *gateway, want int, sinks ...*tenantSink) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n := 0
		for _, s := range sinks {
			n += s.spanCount()
		}
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sinks hold %d of %d spans\n%s", n, want, g.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkTenants checks what the three sinks received: acme's spans, each once, at the gRPC
// sink with the header forwarded; beta's at the HTTP sink; both at the sink of every tenant,
// no request of any sink holding a span of another tenant than its header names.
func checkTenants(t *testing.T, owner map[pcommon.SpanID]string, acmeSink, betaSink, allSink *tenantSink) {
	t.Helper()
	checkSink(t, owner, "acme", acmeSink, "acme")
	checkSink(t, owner, "beta", betaSink, "beta")
	checkSink(t, owner, "every tenant's", allSink, "acme", "beta")
}

// checkSink checks that sink s received exactly the spans of tenants (owner maps each span id
// sent to its tenant), each once, every request with its tenant's header forwarded.
func checkSink(t *testing.T, owner map[pcommon.SpanID]string, name string, s *tenantSink, tenants ...string) {
	t.Helper()
	want := map[string][]pcommon.SpanID{}
	for id, tn := range owner {
		want[tn] = append(want[tn], id)
	}
	sorted := func(ids []pcommon.SpanID) []pcommon.SpanID {
		ids = slices.Clone(ids)
		slices.SortFunc(ids, func(a, b pcommon.SpanID) int { return strings.Compare(a.String(), b.String()) })
		return ids
	}
	got := s.byTenant(t, owner)
	if len(got) != len(tenants) {
		t.Fatalf("%s sink got tenants %v, want %v", name, slices.Collect(mapsKeys(got)), tenants)
	}
	for _, tn := range tenants {
		if !slices.Equal(sorted(got[tn]), sorted(want[tn])) {
			t.Fatalf("%s sink: %d spans of %s, want exactly its %d", name, len(got[tn]), tn, len(want[tn]))
		}
	}
}

func mapsKeys(m map[string][]pcommon.SpanID) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// tenantDests are the destinations of the tenant tests: acme's tenant to a gRPC upstream,
// beta's to an OTLP/HTTP one, both to a third that takes every tenant; each forwards the
// header.
func tenantDests(acme, beta, all string) []string {
	return []string{
		"-intake.headers", "X-Scope-OrgID",
		"-dest", "name=acme,endpoint=" + acme + ",protocol=v1,mode=unary,retry-initial=20ms,retry-max=200ms,match-header=x-scope-orgid:acme,forward-headers=x-scope-orgid",
		"-dest", "name=beta,endpoint=http://" + beta + ",protocol=http,retry-initial=20ms,retry-max=200ms,match-header=x-scope-orgid:beta,forward-headers=x-scope-orgid",
		"-dest", "name=all,endpoint=" + all + ",protocol=v1,mode=unary,retry-initial=20ms,retry-max=200ms,match-header=x-scope-orgid:*,forward-headers=x-scope-orgid",
	}
}

// Two tenants through one real otlpgate, sent by the official OpenTelemetry Go SDK over gRPC
// and HTTP: each tenant's upstream receives exactly its spans with the header forwarded, and
// no upstream request holds both tenants' spans. With the spool, the same holds for what was
// spooled before a kill -9 and delivered by the next start: the tenant survives the spool.
func TestBinaryTenants(t *testing.T) {
	bin := buildBinary(t)
	const perExporter = 40
	t.Run("memory", func(t *testing.T) {
		acme, beta, all := startTenantSink(t, "", false), startTenantSink(t, "", true), startTenantSink(t, "", false)
		g := startGateway(t, bin, append([]string{"-batch.max-age", "20ms"},
			tenantDests(acme.addr, beta.addr, all.addr)...)...)
		httpAddr := g.http
		waitReady(t, g)
		owner := sendTenants(t, g.grpcAddr, httpAddr, perExporter)
		waitSpans(t, g, 2*len(owner), acme, beta, all)
		checkTenants(t, owner, acme, beta, all)
	})
	t.Run("spool", func(t *testing.T) {
		dir := t.TempDir()
		// The upstreams start only after the restart, on the addresses otlpgate was given while
		// they were down: they cannot bind :0, so the ports are chosen here (the window until
		// their bind is inherent to an upstream that comes up later).
		ups := testkit.FreeAddrs(t, 3)
		acmeAddr, betaAddr, allAddr := ups[0], ups[1], ups[2]
		flags := append([]string{"-batch.max-age", "20ms", "-spool.dir", filepath.Join(dir, "spool")},
			tenantDests(acmeAddr, betaAddr, allAddr)...)
		// Nothing listens at the upstreams: every request is acknowledged once spooled, and
		// stays there until the process is killed.
		g := startGateway(t, bin, flags...)
		httpAddr := g.http
		waitReady(t, g)
		owner := sendTenants(t, g.grpcAddr, httpAddr, perExporter)
		g.cmd.Process.Kill()
		<-g.exited

		acme, beta, all := startTenantSink(t, acmeAddr, false), startTenantSink(t, betaAddr, true), startTenantSink(t, allAddr, false)
		g = startGateway(t, bin, flags...)
		waitReady(t, g)
		waitSpans(t, g, 2*len(owner), acme, beta, all)
		checkTenants(t, owner, acme, beta, all)
	})
}

// The tenant flags and the destinations' tenant keys: what they set, and a clear error at
// start-up for each malformed or contradictory value.
func TestTenantFlags(t *testing.T) {
	f := func(args []string, wantErr string) *config {
		t.Helper()
		cfg, err := parseConfig(args)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%v: %v", args, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%v: error %v, want one containing %q", args, err, wantErr)
		}
		return &cfg
	}
	const a, b = "name=a,endpoint=x:1,protocol=v1,mode=unary", "name=b,endpoint=y:1,protocol=v1,mode=unary"
	if cfg := f(nil, ""); len(cfg.gw.Tenants.Headers) != 0 {
		t.Error("tenants on by default")
	}
	// The routes the destinations' match-header make are the gateway's (its TestTenantRoutes).
	cfg := f([]string{"-intake.headers", "X-Scope-OrgID, x-region", "-intake.headers.default", "anonymous", "-intake.max-tenants", "50",
		"-dest", a + ",match-header=x-scope-orgid:acme|beta,forward-headers=x-scope-orgid|x-region", "-dest", b}, "")
	tc := cfg.gw.Tenants
	if !slices.Equal(tc.Headers, []string{"x-scope-orgid", "x-region"}) || tc.Default != "anonymous" || tc.Max != 50 || tc.MetricsTop != 20 {
		t.Errorf("%+v", tc)
	}
	if tc.MaxPerPeer != 100 {
		t.Errorf("-intake.max-tenants-per-peer defaults to %d, want 100", tc.MaxPerPeer)
	}
	f([]string{"-intake.headers", "x-scope-orgid", "-intake.max-tenants-per-peer", "-1"}, "-intake.max-tenants-per-peer -1")
	f([]string{"-auth.tenants-file", "/nonexistent"}, "-auth.tenants-file binds tokens to tenant header values: give -intake.headers")
	f([]string{"-intake.headers", "x-scope-orgid", "-auth.tenants-file", "/nonexistent", "-auth.token-file", "/t"}, "leave out -auth.token-file")
	f([]string{"-intake.headers", "x-scope-orgid", "-auth.tenants-file", "/nonexistent", "-http.auth.token-file", "/t"}, "leave out -auth.token-file")
	f([]string{"-dest", a + ",match-header=x-scope-orgid:acme"}, "give -intake.headers")
	f([]string{"-dest", a + ",forward-headers=x-scope-orgid"}, "give -intake.headers")
	f([]string{"-intake.headers.default", "x"}, "-intake.headers.default needs -intake.headers")
	f([]string{"-intake.headers", "x-scope-orgid", "-dest", a + ",forward-headers=x-region"}, `forward-headers names "x-region", which is not one of -intake.headers`)
	f([]string{"-intake.headers", "x-scope-orgid", "-dest", a + ",match-header=x-region:eu"}, "match-header \"x-region\" is not one of -intake.headers")
	f([]string{"-intake.headers", "x-scope-orgid", "-dest", a + ",match-header=acme"}, "want NAME:VALUE")
	f([]string{"-intake.headers", "x-scope-orgid", "-intake.max-tenants", "0"}, "-intake.max-tenants 0")
	f([]string{"-intake.headers", "grpc-status"}, "reserved")
	f([]string{"-intake.headers", "x scope"}, "lower-case letters")
	f([]string{"-intake.headers", "x-a,x-a"}, "named twice")
	f([]string{"-intake.headers", "x-scope-orgid", "-intake.headers.default", "caf\u00e9"}, "not printable ASCII")
	f([]string{"-intake.headers", "x-scope-orgid", "-dest", "name=s,endpoint=x:1,protocol=otep,forward-headers=x-scope-orgid"}, "mode=unary")

	cfg = f([]string{"-intake.headers", "x-scope-orgid", "-tenant.rate", "10MiB/s", "-tenant.burst", "20MiB", "-tenant.metrics.top", "5"}, "")
	if r := cfg.gw.Tenants.Rate; r.PerSecond != 10<<20 || r.Burst != 20<<20 || r.Items || cfg.gw.Tenants.MetricsTop != 5 {
		t.Errorf("rate %+v top %d", r, cfg.gw.Tenants.MetricsTop)
	}
	cfg = f([]string{"-intake.headers", "x-scope-orgid", "-tenant.rate", "5000items/s"}, "")
	if r := cfg.gw.Tenants.Rate; r.PerSecond != 5000 || r.Burst != 5000 || !r.Items {
		t.Errorf("rate %+v", r)
	}
	f([]string{"-tenant.rate", "10MiB/s"}, "give -intake.headers")
	f([]string{"-intake.headers", "x-scope-orgid", "-tenant.rate", "10MiB"}, "want bytes or items per second")
	f([]string{"-intake.headers", "x-scope-orgid", "-tenant.rate", "0/s"}, "want a positive amount")
	f([]string{"-intake.headers", "x-scope-orgid", "-tenant.rate", "10MiB/s", "-tenant.burst", "10items"}, "-tenant.burst \"10items\" counts items")
	f([]string{"-intake.headers", "x-scope-orgid", "-tenant.burst", "1MiB"}, "-tenant.burst needs -tenant.rate")
	f([]string{"-intake.headers", "x-scope-orgid", "-tenant.metrics.top", "-1"}, "-tenant.metrics.top -1")
}

// One tenant over -tenant.rate at the real binary gets 429 with Retry-After over OTLP/HTTP
// and RESOURCE_EXHAUSTED with RetryInfo over gRPC, while another tenant, sending between its
// refusals over both intakes, is served without a single refusal; the upstream receives what
// was admitted, each tenant's alone, and the refusals are counted by tenant.
func TestBinaryTenantRate(t *testing.T) {
	bin := buildBinary(t)
	sink := startTenantSink(t, "", false)
	// 1 item per second with a burst of 100: a tenant sending 50-span requests gets two in,
	// and the third would wait 50 seconds; 20 one-span requests never run short.
	g := startGateway(t, bin, "-batch.max-age", "20ms", "-intake.headers", "x-scope-orgid",
		"-tenant.rate", "1items/s", "-tenant.burst", "100items",
		"-dest", "name=all,endpoint="+sink.addr+",protocol=v1,mode=unary,forward-headers=x-scope-orgid")
	httpAddr := g.http
	waitReady(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := ptraceotlp.NewGRPCClient(conn)
	request := func(tenant string, spans int, seed byte) ptraceotlp.ExportRequest {
		td := ptrace.NewTraces()
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		for i := range spans {
			sp := ss.AppendEmpty()
			sp.SetName(tenant)
			sp.SetTraceID(pcommon.TraceID{seed, 1})
			sp.SetSpanID(pcommon.SpanID{seed, byte(i), 1})
		}
		return ptraceotlp.NewExportRequestFromTraces(td)
	}
	grpcSend := func(tenant string, spans int, seed byte) error {
		_, err := tc.Export(metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", tenant), request(tenant, spans, seed))
		return err
	}
	httpSend := func(tenant string, spans int, seed byte) (*http.Response, error) {
		body, err := request(tenant, spans, seed).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/v1/traces", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Scope-OrgID", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	quiet := 0
	quietSend := func(seed byte) {
		t.Helper()
		if err := grpcSend("quiet", 1, seed); err != nil {
			t.Fatalf("the quiet tenant was refused over gRPC: %v", err)
		}
		resp, err := httpSend("quiet", 1, seed+100)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the quiet tenant was refused over HTTP: %v %v", resp, err)
		}
		quiet += 2
	}
	if err := grpcSend("noisy", 50, 1); err != nil {
		t.Fatalf("noisy within its burst: %v", err)
	}
	quietSend(2)
	if resp, err := httpSend("noisy", 50, 3); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("noisy within its burst over HTTP: %v %v", resp, err)
	}
	for i := range 5 {
		quietSend(byte(10 + i))
		err := grpcSend("noisy", 50, byte(20+i))
		st := status.Convert(err)
		var delay time.Duration
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				delay = ri.GetRetryDelay().AsDuration()
			}
		}
		if st.Code() != codes.ResourceExhausted || delay < 30*time.Second || delay > 50*time.Second {
			t.Fatalf("noisy over its rate over gRPC: %v, RetryInfo %v; want RESOURCE_EXHAUSTED and about 50s", err, delay)
		}
		resp, err := httpSend("noisy", 50, byte(30+i))
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("noisy over its rate over HTTP: %v %v", resp, err)
		}
		if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra < 30 || ra > 50 {
			t.Fatalf("Retry-After %q, want about 50", resp.Header.Get("Retry-After"))
		}
	}
	waitSpans(t, g, 100+quiet, sink)
	sink.mu.Lock()
	count := map[string]int{}
	for _, c := range sink.calls {
		count[c.org] += len(c.spans)
	}
	sink.mu.Unlock()
	if count["noisy"] != 100 || count["quiet"] != quiet || len(count) != 2 {
		t.Fatalf("the upstream got %v, want noisy 100 and quiet %d", count, quiet)
	}
	if got := scrape(t, g.admin, "otlpgate_tenant_throttled_requests_total", `tenant="noisy"`); got != 10 {
		t.Fatalf("noisy throttled %v times, want 10", got)
	}
	if got := scrape(t, g.admin, "otlpgate_tenant_admitted_items_total", `tenant="quiet"`); got != float64(quiet) {
		t.Fatalf("quiet admitted %v items, want %d", got, quiet)
	}
	if got := scrape(t, g.admin, "otlpgate_tenant_throttled_requests_total", `tenant="quiet"`); got != 0 {
		t.Fatalf("quiet throttled %v times", got)
	}
}

func TestParseTenantRate(t *testing.T) {
	f := func(rate, burst string, want tenant.Rate) {
		t.Helper()
		got, err := parseTenantRate(rate, burst)
		if err != nil || got != want {
			t.Fatalf("%q %q: %+v %v, want %+v", rate, burst, got, err, want)
		}
	}
	f("", "", tenant.Rate{})
	f("10MiB/s", "", tenant.Rate{PerSecond: 10 << 20, Burst: 10 << 20})
	f("10MiB/s", "20MiB", tenant.Rate{PerSecond: 10 << 20, Burst: 20 << 20})
	f("1000/s", "", tenant.Rate{PerSecond: 1000, Burst: 1000})
	f("5000items/s", "10000items", tenant.Rate{PerSecond: 5000, Burst: 10000, Items: true})
	for _, bad := range [][2]string{{"10MiB", ""}, {"0/s", ""}, {"fast/s", ""}, {"-5items/s", ""},
		{"10MiB/s", "100items"}, {"5items/s", "1MiB"}, {"", "1MiB"}, {"10MiB/s", "0"}} {
		if _, err := parseTenantRate(bad[0], bad[1]); err == nil {
			t.Errorf("%q %q: no error", bad[0], bad[1])
		}
	}
}
