package grpcserver

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

func startTenants(t *testing.T, max int, routes ...tenant.Match) *env {
	t.Helper()
	e, _ := startTenantsWith(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: max, Routes: routes})
	return e
}

// startTenantsWith starts the server and its pipeline with the tenant table of cfg.
func startTenantsWith(t *testing.T, cfg tenant.Config) (*env, *tenant.Table) {
	t.Helper()
	return startTenantsOn(t, TransportGRPCGo, cfg)
}

// startTenantsOn is startTenantsWith on transport tr.
func startTenantsOn(t *testing.T, tr string, cfg tenant.Config) (*env, *tenant.Table) {
	t.Helper()
	ts, err := tenant.NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc := testPipelineConfig()
	pc.Tenants = ts
	sc := configFor(tr)
	sc.Tenants = ts
	return start(t, pc, sc, nil), ts
}

func withOrg(ctx context.Context, org string) context.Context {
	if org == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "X-Scope-OrgID", org)
}

// The tenant of every gRPC service comes from the call's metadata: v1 Export, OTEP unary and
// OTEP streams (the stream's metadata), each request landing in a batch of its own tenant; a
// call without the header is the default tenant's.
func TestTenantFromMetadata(t *testing.T) {
	e := startTenants(t, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := traceBody(t, 1, 2)
	var r codec.Raw
	for _, org := range []string{"acme", "beta", ""} {
		r.SetBytes(body)
		if err := e.raw.Invoke(withOrg(ctx, org), "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &r, &codec.Raw{}); err != nil {
			t.Fatalf("v1 %q: %v", org, err)
		}
		r.SetBytes(otepReq(t, 1, body))
		resp := &otepv1.ExportResponse{}
		if err := e.raw.Invoke(withOrg(ctx, org), "/otlpgate.otep.v1.UnaryExporter/ExportTraces", &r, resp); err != nil || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("otep unary %q: %v %v", org, resp, err)
		}
		s := e.rawStream(t, withOrg(ctx, org))
		sendRaw(t, s, otepReq(t, 7, body))
		if resp, err := recvResp(t, s); err != nil || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("otep stream %q: %v %v", org, resp, err)
		}
		s.CloseSend()
		if _, err := drainEOF(s); err != nil {
			t.Fatal(err)
		}
		e.p.Flush()
	}
	count := map[string]int{}
	for i, g := range e.rec.Received() {
		// Each tenant's three requests are in one batch, or several: never another's.
		n := bytes.Count(g.Body, body)
		if n == 0 || len(g.Body) != n*len(body) {
			t.Fatalf("batch %d of %q holds something besides whole requests", i, g.Tenant)
		}
		count[g.Tenant] += n
	}
	if count["acme"] != 3 || count["beta"] != 3 || count[""] != 3 || len(count) != 3 {
		t.Fatalf("requests by tenant %v, want 3 each of acme, beta and the default", count)
	}
}

// Refusals: a new value past -intake.max-tenants is RESOURCE_EXHAUSTED without RetryInfo (not
// worth retrying), a bad value INVALID_ARGUMENT, a value no destination takes
// PERMISSION_DENIED; known tenants are still served, and nothing refused reaches a batch.
func TestTenantRefusals(t *testing.T) {
	e := startTenants(t, 2, tenant.Match{Header: "x-scope-orgid"}) // the default and one more
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := traceBody(t, 2, 1)
	call := func(org string) error {
		var r codec.Raw
		r.SetBytes(body)
		return e.raw.Invoke(withOrg(ctx, org), "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &r, &codec.Raw{})
	}
	if err := call("acme"); err != nil {
		t.Fatal(err)
	}
	err := call("beta")
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "-intake.max-tenants") || len(st.Details()) != 0 {
		t.Fatalf("a third tenant: %v, want RESOURCE_EXHAUSTED without details", err)
	}
	if err := call(strings.Repeat("x", 300)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a 300-byte value: %v", err)
	}
	// A stream is refused before its first message.
	s, err := e.raw.NewStream(withOrg(ctx, "gamma"), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/otlpgate.otep.v1.StreamExporter/ExportTraces")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recvResp(t, s); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("stream of a third tenant: %v", err)
	}
	if err := call("acme"); err != nil {
		t.Fatalf("a known tenant at the bound: %v", err)
	}
	e.p.Flush()
	for _, g := range e.rec.Received() {
		if g.Tenant != "acme" {
			t.Fatalf("a batch of %q", g.Tenant)
		}
	}

	r := startTenants(t, 10, tenant.Match{Header: "x-scope-orgid", Values: []string{"acme"}})
	var raw codec.Raw
	raw.SetBytes(body)
	if err := r.raw.Invoke(withOrg(ctx, "beta"), "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &raw, &codec.Raw{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a tenant no destination takes: %v", err)
	}
}

// The metadata grpc-go filed is read in place: the key is found with this grpc-go, and a call
// of a known tenant reads it without an allocation (tenant_alloc_test.go).
func TestIncomingKeyFound(t *testing.T) {
	if incomingKey == nil {
		t.Fatal("grpc-go's metadata key was not found: every call copies its metadata to read the tenant")
	}
	md := metadata.MD{"x-scope-orgid": {"acme"}}
	ctx := metadata.NewIncomingContext(context.Background(), md)
	if got := incomingMD(ctx); got["x-scope-orgid"][0] != "acme" {
		t.Fatalf("read %v", got)
	}
	if got := incomingMD(context.Background()); got != nil {
		t.Fatalf("a context without metadata read %v", got)
	}
}

// A tenant over -tenant.rate: v1 calls get RESOURCE_EXHAUSTED with RetryInfo, OTEP unary and
// stream requests FailedRetryable with retry_delay_ms (the stream goes on); another tenant's
// calls, between them, are all served; nothing refused was admitted, and what the refusals
// took from the bucket does not make the tenant pay twice.
func TestTenantRateGRPC(t *testing.T) {
	body := traceBody(t, 3, 10) // 10 spans
	e, _ := startTenantsWith(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Rate: tenant.Rate{PerSecond: 1, Burst: 20, Items: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v1 := func(org string) error {
		var r codec.Raw
		r.SetBytes(body)
		return e.raw.Invoke(withOrg(ctx, org), "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &r, &codec.Raw{})
	}
	for i := range 2 { // the burst: 20 items
		if err := v1("noisy"); err != nil {
			t.Fatalf("noisy call %d within the burst: %v", i, err)
		}
	}
	err := v1("noisy")
	st := status.Convert(err)
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(interface{ GetRetryDelay() *durationpb.Duration }); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if st.Code() != codes.ResourceExhausted || delay <= 0 || delay > 10*time.Second || !strings.Contains(st.Message(), "-tenant.rate") {
		t.Fatalf("noisy over its rate: %v, retry delay %v; want RESOURCE_EXHAUSTED and a delay up to 10s", err, delay)
	}
	for i := range 2 {
		if err := v1("quiet"); err != nil {
			t.Fatalf("another tenant's call %d: %v", i, err)
		}
	}

	var r codec.Raw
	r.SetBytes(otepReq(t, 9, body))
	resp := &otepv1.ExportResponse{}
	if err := e.raw.Invoke(withOrg(ctx, "noisy"), "/otlpgate.otep.v1.UnaryExporter/ExportTraces", &r, resp); err != nil ||
		resp.Id != 9 || resp.ResultCode != otepv1.ResultCode_FailedRetryable || resp.RetryDelayMs == 0 || resp.RetryDelayMs > 10000 {
		t.Fatalf("OTEP unary over the rate: %v %v", resp, err)
	}
	s := e.rawStream(t, withOrg(ctx, "noisy"))
	for id := uint64(1); id <= 2; id++ {
		sendRaw(t, s, otepReq(t, id, body))
		resp, err := recvResp(t, s)
		if err != nil || resp.Id != id || resp.ResultCode != otepv1.ResultCode_FailedRetryable || resp.RetryDelayMs == 0 {
			t.Fatalf("OTEP stream request %d over the rate: %v %v", id, resp, err)
		}
	}
	s.CloseSend()
	if _, err := drainEOF(s); err != nil {
		t.Fatalf("the stream of a throttled tenant ended with %v", err)
	}
	e.p.Flush()
	count := map[string]int{}
	for _, g := range e.rec.Received() {
		count[g.Tenant] += bytes.Count(g.Body, body)
	}
	if count["noisy"] != 2 || count["quiet"] != 2 {
		t.Fatalf("admitted requests by tenant %v, want noisy 2 and quiet 2", count)
	}
	if got := testutil.ToFloat64(ctr.refused[kindV1][fastpath.Traces][admission.Throttled]); got < 1 {
		t.Fatalf("tenant_rate refusals counted %v", got)
	}
}

// An OTEP stream that stays quiet longer than -intake.tenant-idle loses its tenant from the
// table; its next request looks the tenant up again, so the tenant is back in the table (its
// requests counted and rate-limited under the tenant the table holds), and every request is
// still in a batch of its own tenant.
func TestTenantStreamAfterIdle(t *testing.T) { onTransports(t, testTenantStreamAfterIdle) }

func testTenantStreamAfterIdle(t *testing.T, tr string) {
	const idle = 50 * time.Millisecond
	e, ts := startTenantsOn(t, tr, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10, Idle: idle})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := traceBody(t, 1, 2)
	s := e.rawStream(t, withOrg(ctx, "acme"))
	send := func(id uint64) {
		t.Helper()
		sendRaw(t, s, otepReq(t, id, body))
		if resp, err := recvResp(t, s); err != nil || resp.Id != id || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("request %d: %v %v", id, resp, err)
		}
		e.p.Flush()
	}
	inTable := func() bool {
		for _, tn := range ts.All() {
			if tn.String() == "acme" {
				return true
			}
		}
		return false
	}
	send(1)
	if !inTable() {
		t.Fatal("acme is not in the table after its first request")
	}
	// Quiet past the idle time; the sweep takes acme out (no batch of it is open).
	testkit.WaitFor(t, "acme swept out", func() bool {
		time.Sleep(idle)
		ts.Sweep()
		return !inTable()
	})
	send(2)
	if !inTable() {
		t.Fatal("the stream's request after the idle time left acme out of the table")
	}
	s.CloseSend()
	if _, err := drainEOF(s); err != nil {
		t.Fatal(err)
	}
	got := e.rec.Received()
	n := 0
	for _, g := range got {
		if g.Tenant != "acme" || len(g.Body) != len(body) {
			t.Fatalf("a batch of %q with %d bytes, want acme's request", g.Tenant, len(g.Body))
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d batches, want acme's 2 requests", n)
	}
}

// rawFrom is a raw-codec client of e's server that connects from the loopback address src, a
// client address of its own.
func rawFrom(t *testing.T, e *env, src string) *grpc.ClientConn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	cc, err := grpc.NewClient(e.srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// One client address sending new tenant values takes no more than
// -intake.max-tenants-per-peer places: past them its new values are RESOURCE_EXHAUSTED (a
// stream's before its first message) while it is still served with known tenants, and a
// client at another address brings a new tenant in.
func TestTenantPerPeer(t *testing.T) {
	e, ts := startTenantsWith(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 100, MaxPerPeer: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := traceBody(t, 1, 1)
	sprayer, other := rawFrom(t, e, "127.0.0.2"), rawFrom(t, e, "127.0.0.3")
	call := func(cc *grpc.ClientConn, org string) error {
		var r codec.Raw
		r.SetBytes(body)
		return cc.Invoke(withOrg(ctx, org), "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &r, &codec.Raw{})
	}
	for _, org := range []string{"s1", "s2"} {
		if err := call(sprayer, org); err != nil {
			t.Fatal(org, err)
		}
	}
	err := call(sprayer, "s3")
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "-intake.max-tenants-per-peer") {
		t.Fatalf("a third new value from one address: %v", err)
	}
	s, err := sprayer.NewStream(withOrg(ctx, "s4"), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/otlpgate.otep.v1.StreamExporter/ExportTraces")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recvResp(t, s); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a stream of a new value from the address at its bound: %v", err)
	}
	if err := call(other, "newcomer"); err != nil {
		t.Fatalf("a new tenant from another address: %v", err)
	}
	if err := call(sprayer, "newcomer"); err != nil {
		t.Fatalf("a known tenant from the address at its bound: %v", err)
	}
	if n := ts.PeerTenants(netip.MustParseAddr("127.0.0.2")); n != 2 {
		t.Fatalf("127.0.0.2 holds %d tenants, want 2", n)
	}
	e.p.Flush()
	count := map[string]int{}
	for _, g := range e.rec.Received() {
		count[g.Tenant] += bytes.Count(g.Body, body)
	}
	if len(count) != 3 || count["s1"] != 1 || count["s2"] != 1 || count["newcomer"] != 2 {
		t.Fatalf("requests by tenant %v", count)
	}
}

// With -auth.tenants-file a call's tenant is its token's, on every service: a header that
// repeats it is fine, one that names another tenant is PERMISSION_DENIED, a call without a
// known token UNAUTHENTICATED; nothing refused reaches a batch.
func TestTenantCredentialsGRPC(t *testing.T) {
	e, ts := startTenantsWith(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	if err := ts.SetCredentials([]tenant.Credential{{Token: "tok-acme", Values: []string{"acme"}}, {Token: "tok-beta", Values: []string{"beta"}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := traceBody(t, 1, 1)
	as := func(tok, org string) context.Context {
		c := withOrg(ctx, org)
		if tok != "" {
			c = metadata.AppendToOutgoingContext(c, "authorization", "Bearer "+tok)
		}
		return c
	}
	v1 := func(c context.Context) error {
		var r codec.Raw
		r.SetBytes(body)
		return e.raw.Invoke(c, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &r, &codec.Raw{})
	}
	for _, c := range []struct {
		tok, org string
		want     codes.Code
	}{
		{"tok-acme", "", codes.OK},
		{"tok-acme", "acme", codes.OK},
		{"tok-beta", "", codes.OK},
		{"tok-acme", "beta", codes.PermissionDenied},
		{"", "acme", codes.Unauthenticated},
		{"tok-gamma", "", codes.Unauthenticated},
	} {
		if err := v1(as(c.tok, c.org)); status.Code(err) != c.want {
			t.Errorf("v1 with %q claiming %q: %v, want %v", c.tok, c.org, err, c.want)
		}
	}
	var r codec.Raw
	r.SetBytes(otepReq(t, 1, body))
	resp := &otepv1.ExportResponse{}
	if err := e.raw.Invoke(as("tok-beta", "beta"), "/otlpgate.otep.v1.UnaryExporter/ExportTraces", &r, resp); err != nil || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("otep unary: %v %v", resp, err)
	}
	s := e.rawStream(t, as("tok-acme", ""))
	sendRaw(t, s, otepReq(t, 2, body))
	if resp, err := recvResp(t, s); err != nil || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("otep stream: %v %v", resp, err)
	}
	s.CloseSend()
	if _, err := drainEOF(s); err != nil {
		t.Fatal(err)
	}
	bad, err := e.raw.NewStream(as("tok-acme", "beta"), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/otlpgate.otep.v1.StreamExporter/ExportTraces")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recvResp(t, bad); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a stream claiming another tenant: %v", err)
	}
	e.p.Flush()
	count := map[string]int{}
	for _, g := range e.rec.Received() {
		count[g.Tenant] += bytes.Count(g.Body, body)
	}
	if len(count) != 2 || count["acme"] != 3 || count["beta"] != 2 {
		t.Fatalf("requests by tenant %v, want acme 3 and beta 2", count)
	}
}
