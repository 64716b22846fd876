package hostile

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// tenantClient sends OTLP traces to g over HTTP and gRPC from its own loopback address, with a
// tenant header and a bearer token of its choosing: one client as the gateway sees it.
type tenantClient struct {
	g    *gate
	hc   *http.Client
	cc   *grpc.ClientConn
	tc   coltracev1.TraceServiceClient
	auth string // the Authorization value, "" for none
}

func newTenantClient(t *testing.T, g *gate, src, auth string) *tenantClient {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c := &tenantClient{g: g, auth: auth, hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}}
	var err error
	c.cc, err = grpc.NewClient(g.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	c.tc = coltracev1.NewTraceServiceClient(c.cc)
	t.Cleanup(func() {
		c.cc.Close()
		c.hc.CloseIdleConnections()
	})
	return c
}

// send exports req as tenant org ("" for no header), over HTTP or gRPC, and returns nil when
// it was accepted, else the refusal: the HTTP status or the gRPC code.
func (c *tenantClient) send(viaHTTP bool, org string, req *coltracev1.ExportTraceServiceRequest) error {
	if viaHTTP {
		body, err := req.MarshalVT()
		if err != nil {
			return err
		}
		hreq, _ := http.NewRequest(http.MethodPost, "http://"+c.g.HTTP+"/v1/traces", bytes.NewReader(body))
		hreq.Header.Set("Content-Type", "application/x-protobuf")
		if org != "" {
			hreq.Header.Set("X-Scope-OrgID", org)
		}
		if c.auth != "" {
			hreq.Header.Set("Authorization", c.auth)
		}
		resp, err := c.hc.Do(hreq)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return httpStatus(resp.StatusCode)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if org != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", org)
	}
	if c.auth != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", c.auth)
	}
	_, err := c.tc.Export(ctx, req)
	return err
}

type httpStatus int

func (s httpStatus) Error() string { return fmt.Sprintf("HTTP %d", int(s)) }

// refusedAs reports whether err is the refusal a client is given over HTTP (code) and gRPC
// (grpcCode).
func refusedAs(err error, code int, grpcCode codes.Code) bool {
	if hs, ok := err.(httpStatus); ok {
		return int(hs) == code
	}
	return status.Code(err) == grpcCode
}

// tinyTrace is a one-span request of the spray, whose span ids are not checked.
func tinyTrace(seed uint64) *coltracev1.ExportTraceServiceRequest {
	return otlpgen.New(seed).Spans(otlpgen.Shape{Spans: 1, Attrs: 1})
}

// newcomerSends has a well-behaved client bring the new tenant "newcomer" in: ten requests
// over each intake, every one of which must be accepted; it returns their span ids.
func newcomerSends(t *testing.T, c *tenantClient, org func(i int) string) []uint64 {
	t.Helper()
	var ids []uint64
	gen := otlpgen.New(1) // distinct span ids from one generator
	for i := range 20 {
		req := gen.Spans(otlpgen.Shape{Spans: 3, Attrs: 2})
		if err := c.send(i%2 == 0, org(i), req); err != nil {
			t.Fatalf("the newcomer's request %d (%s) was refused: %v", i, map[bool]string{true: "HTTP", false: "gRPC"}[i%2 == 0], err)
		}
		ids = append(ids, testkit.ResourceSpanIDs(req.ResourceSpans)...)
	}
	return ids
}

// checkNewcomer waits for the newcomer's spans at its own upstream and fails unless that
// upstream received exactly them, once each, every request with the tenant's header.
func checkNewcomer(t *testing.T, sink *testkit.GRPCSink, ids []uint64) {
	t.Helper()
	if missing := sink.WaitSpans(ids); missing != 0 {
		t.Fatalf("%d of the newcomer's %d spans did not reach its upstream: %s", missing, len(ids), sink)
	}
	got := sink.Spans()
	if len(got) != len(ids) {
		t.Errorf("the newcomer's upstream received %d distinct spans, want exactly its %d", len(got), len(ids))
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("span %x arrived %d times", id, got[id])
		}
	}
	for _, r := range sink.Requests() {
		if v := r.MD.Get("x-scope-orgid"); !slices.Equal(v, []string{"newcomer"}) {
			t.Errorf("a request at the newcomer's upstream carried x-scope-orgid %q", v)
		}
	}
}

// tenantGate starts otlpgate with tenants on and two upstreams: one that takes the tenant
// "newcomer" only, and one that takes every other tenant, each sent the tenant's header.
func tenantGate(t *testing.T, extra ...string) (g *gate, newcomer, rest *testkit.GRPCSink) {
	t.Helper()
	newcomer, rest = testkit.StartGRPCSink(t, ""), testkit.StartGRPCSink(t, "")
	args := append([]string{"-intake.headers", "x-scope-orgid", "-batch.max-age", "20ms",
		"-dest", "name=newcomer,endpoint=" + newcomer.Addr() + ",protocol=v1,mode=unary,match-header=x-scope-orgid:newcomer,forward-headers=x-scope-orgid",
		"-dest", "name=rest,endpoint=" + rest.Addr() + ",protocol=v1,mode=unary,forward-headers=x-scope-orgid"}, extra...)
	return startGate(t, args...), newcomer, rest
}

// One client sprays distinct tenant values, more than the whole table holds (-intake.max-tenants
// 1000 by default), and keeps using them while a well-behaved client at another address brings
// a new tenant in. Each client address holds at most -intake.max-tenants-per-peer (100 by
// default) of the table's places: the sprayer is refused past them, counted, and the newcomer's
// every request is served, its spans delivered to its own upstream exactly. Before the bound,
// the spray filled the table in well under a second and the newcomer was refused (HTTP 403,
// RESOURCE_EXHAUSTED) for as long as the sprayer kept its values in use.
func TestTenantSprayPerPeer(t *testing.T) {
	g, newcomerSink, _ := tenantGate(t)
	w := watch(t, g, 50*time.Millisecond, 10*time.Second)
	sprayer := newTenantClient(t, g, "127.0.0.2", "")
	var accepted, refused, other atomic.Int64
	var mu sync.Mutex
	var held []string
	spray := func(from, to int) {
		for i := from; i < to; i++ {
			org := fmt.Sprintf("spray-%05d", i)
			err := sprayer.send(i%2 == 0, org, tinyTrace(uint64(i)))
			switch {
			case err == nil:
				accepted.Add(1)
				mu.Lock()
				held = append(held, org)
				mu.Unlock()
			case refusedAs(err, http.StatusForbidden, codes.ResourceExhausted):
				refused.Add(1)
			default:
				other.Add(1)
				t.Errorf("spray %d: %v", i, err)
			}
		}
	}
	const sprayed = 1200
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() { spray(p*sprayed/4, (p+1)*sprayed/4) })
	}
	wg.Wait()
	t.Logf("spray: %d accepted, %d refused", accepted.Load(), refused.Load())
	// The sprayer keeps its values in use, and keeps trying new ones, while the newcomer
	// arrives.
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() {
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}
	t.Cleanup(halt) // also when the test fails before it halts the sprayer itself
	var touched atomic.Int64
	wg.Go(func() {
		for i := 0; i < 5000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			org := held[i%len(held)]
			mu.Unlock()
			if err := sprayer.send(i%2 == 0, org, tinyTrace(uint64(100_000+i))); err != nil {
				t.Errorf("the sprayer's own tenant %s: %v", org, err)
				return
			}
			touched.Add(1)
			spray(sprayed+i, sprayed+i+1)
		}
	})
	testkit.WaitFor(t, "the sprayer to touch its values", func() bool { return touched.Load() >= 20 })
	newcomer := newTenantClient(t, g, "127.0.0.3", "")
	ids := newcomerSends(t, newcomer, func(int) string { return "newcomer" })
	halt()
	w.end(t, 5*time.Second)
	g.alive(t)

	if accepted.Load() != 100 {
		t.Errorf("the sprayer brought %d new tenants in, want -intake.max-tenants-per-peer (100)", accepted.Load())
	}
	if got := g.metric(t, "otlpgate_tenant_refused_requests_total", `reason="per_peer"`); got != float64(refused.Load()) {
		t.Errorf("per_peer refusals counted %v, the sprayer was refused %d times", got, refused.Load())
	}
	if got := g.metric(t, "otlpgate_tenants"); got != 102 {
		t.Errorf("otlpgate_tenants %v, want 102 (the default, the sprayer's 100, the newcomer)", got)
	}
	checkNewcomer(t, newcomerSink, ids)
}

// With -auth.tenants-file a tenant is its token's. A client holding a token sprays distinct
// tenant header values: each is refused as a claim its token does not make (HTTP 403,
// PERMISSION_DENIED), counted, and creates nothing; without a token it is refused as
// unauthenticated. Its own tenant is served. A well-behaved client whose token is bound to
// "newcomer" is served throughout, with or without the header, its spans delivered exactly to
// its upstream. A SIGHUP reads the file again: the sprayer's token, removed, is refused from
// then on.
func TestTenantSprayTenantsFile(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# token tenant\ntok-newcomer newcomer\ntok-sprayer sprayer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, newcomerSink, rest := tenantGate(t, "-auth.tenants-file", tokens)
	sprayer := newTenantClient(t, g, "127.0.0.2", "Bearer tok-sprayer")
	anonymous := newTenantClient(t, g, "127.0.0.2", "")
	const claims, anon, own = 300, 50, 20
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for p := range 2 {
		wg.Go(func() {
			for i := p; i < claims; i += 2 {
				if err := sprayer.send(i%4 < 2, fmt.Sprintf("spray-%05d", i), tinyTrace(uint64(i))); !refusedAs(err, http.StatusForbidden, codes.PermissionDenied) {
					t.Errorf("claim %d with the sprayer's token: %v, want 403 / PERMISSION_DENIED", i, err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range anon {
			if err := anonymous.send(i%2 == 0, fmt.Sprintf("anon-%05d", i), tinyTrace(uint64(claims+i))); !refusedAs(err, http.StatusUnauthorized, codes.Unauthenticated) {
				t.Errorf("claim %d without a token: %v, want 401 / UNAUTHENTICATED", i, err)
			}
		}
	})
	newcomer := newTenantClient(t, g, "127.0.0.3", "Bearer tok-newcomer")
	ids := newcomerSends(t, newcomer, func(i int) string { return []string{"", "newcomer"}[i/2%2] })
	wg.Wait()
	var sprayerIDs []uint64
	gen := otlpgen.New(2)
	for i := range own {
		req := gen.Spans(otlpgen.Shape{Spans: 1, Attrs: 1})
		if err := sprayer.send(i%2 == 0, "", req); err != nil {
			t.Fatalf("the sprayer's request as its own tenant: %v", err)
		}
		sprayerIDs = append(sprayerIDs, testkit.ResourceSpanIDs(req.ResourceSpans)...)
	}
	g.alive(t)
	if got := g.metric(t, "otlpgate_tenant_refused_requests_total", `reason="claim_mismatch"`); got != claims {
		t.Errorf("claim_mismatch refusals counted %v, want %d", got, claims)
	}
	if got := g.metric(t, "otlpgate_tenant_refused_requests_total", `reason="credential"`); got != anon {
		t.Errorf("credential refusals counted %v, want %d", got, anon)
	}
	if got := g.metric(t, "otlpgate_tenants"); got != 3 {
		t.Errorf("otlpgate_tenants %v, want 3 (the default, sprayer, newcomer)", got)
	}
	checkNewcomer(t, newcomerSink, ids)
	if missing := rest.WaitSpans(sprayerIDs); missing != 0 {
		t.Fatalf("%d of the sprayer's own spans did not arrive: %s", missing, rest)
	}
	if got := rest.Spans(); len(got) != len(sprayerIDs) {
		t.Errorf("the other upstream received %d distinct spans, want the sprayer's %d", len(got), len(sprayerIDs))
	}
	for _, r := range rest.Requests() {
		if v := r.MD.Get("x-scope-orgid"); !slices.Equal(v, []string{"sprayer"}) {
			t.Errorf("a request at the other upstream carried x-scope-orgid %q", v)
		}
	}

	// The operator takes the sprayer's token away.
	if err := os.WriteFile(tokens, []byte("tok-newcomer newcomer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the tenants file to be read again", func() bool {
		return g.metric(t, "otlpgate_tenants_file_reloads_total", `result="ok"`) == 1
	})
	if err := sprayer.send(true, "", tinyTrace(20_000)); !refusedAs(err, http.StatusUnauthorized, codes.Unauthenticated) {
		t.Errorf("the removed token after the reload: %v, want 401", err)
	}
	if err := newcomer.send(false, "", tinyTrace(20_001)); err != nil {
		t.Errorf("the newcomer after the reload: %v", err)
	}
}
