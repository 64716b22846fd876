package httpserver

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
)

func startTenants(t *testing.T, max int, routes ...tenant.Match) *env {
	t.Helper()
	ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: max, Routes: routes})
	if err != nil {
		t.Fatal(err)
	}
	pc := testPipelineConfig()
	pc.Tenants = ts
	sc := DefaultConfig()
	sc.Tenants = ts
	return start(t, pc, sc, nil)
}

func (e *env) postOrg(t *testing.T, org, ctype string, body []byte) response {
	t.Helper()
	hdr := map[string]string{"Content-Type": ctype}
	if org != "" {
		hdr["X-Scope-OrgID"] = org
	}
	return e.do(t, http.MethodPost, "/v1/traces", hdr, body)
}

// A request's tenant is its X-Scope-OrgID header, for protobuf and JSON bodies alike; a
// request without it is the default tenant's; batches never mix tenants.
func TestTenantFromHeaders(t *testing.T) {
	e := startTenants(t, 10)
	body := traces(t, 1, 3)
	for _, org := range []string{"acme", "beta", "", "acme"} {
		if r := e.postOrg(t, org, ctProto, body); r.status != 200 {
			t.Fatalf("%q: status %d %q", org, r.status, r.body)
		}
	}
	js := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"j"}]}]}]}`)
	if r := e.postOrg(t, "beta", ctJSON, js); r.status != 200 {
		t.Fatalf("json: status %d %q", r.status, r.body)
	}
	e.p.Flush()
	count := map[string]int{}
	for _, g := range e.rec.Received() {
		n := bytes.Count(g.Body, body)
		if g.Tenant == "beta" && bytes.Contains(g.Body, []byte("\x2a\x01j")) { // the span name
			n++ // the JSON request, transcoded
		}
		count[g.Tenant] += n
	}
	if count["acme"] != 2 || count["beta"] != 2 || count[""] != 1 || len(count) != 3 {
		t.Fatalf("requests by tenant %v, want acme 2, beta 2, default 1", count)
	}
}

// A new value past -intake.max-tenants is answered 403 (not 429: retrying soon cannot help),
// a bad value 400, a value no destination takes 403; each is counted as tenant_refused, and
// known tenants are still served.
func TestTenantRefusedHTTP(t *testing.T) {
	e := startTenants(t, 2, tenant.Match{Header: "x-scope-orgid"})
	body := traces(t, 2, 1)
	if r := e.postOrg(t, "acme", ctProto, body); r.status != 200 {
		t.Fatalf("acme: %d", r.status)
	}
	before := testutil.ToFloat64(ctr.rejected[rejectTenant])
	r := e.postOrg(t, "beta", ctProto, body)
	if st := status(t, r.body); r.status != 403 || codes.Code(st.Code) != codes.ResourceExhausted || !strings.Contains(st.Message, "-intake.max-tenants") || r.header.Get("Retry-After") != "" {
		t.Fatalf("a third tenant: %d %v Retry-After %q", r.status, st, r.header.Get("Retry-After"))
	}
	if r := e.postOrg(t, strings.Repeat("x", 300), ctProto, body); r.status != 400 {
		t.Fatalf("a 300-byte value: %d", r.status)
	}
	if r := e.postOrg(t, "acme", ctProto, body); r.status != 200 {
		t.Fatalf("a known tenant at the bound: %d", r.status)
	}
	if got := testutil.ToFloat64(ctr.rejected[rejectTenant]) - before; got != 2 {
		t.Fatalf("tenant_refused counted %v, want 2", got)
	}
	e.p.Flush()
	for _, g := range e.rec.Received() {
		if g.Tenant != "acme" {
			t.Fatalf("a batch of %q", g.Tenant)
		}
	}

	o := startTenants(t, 10, tenant.Match{Header: "x-scope-orgid", Values: []string{"acme"}})
	if r := o.postOrg(t, "beta", ctProto, body); r.status != 403 || codes.Code(status(t, r.body).Code) != codes.PermissionDenied {
		t.Fatalf("a tenant no destination takes: %d", r.status)
	}
}

// A tenant over -tenant.rate is answered 429 with Retry-After, protobuf and JSON alike, while
// another tenant's requests between its refusals are all served.
func TestTenantRateHTTP(t *testing.T) {
	body := traces(t, 3, 10) // 10 spans
	ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Rate: tenant.Rate{PerSecond: 1, Burst: 20, Items: true}})
	if err != nil {
		t.Fatal(err)
	}
	pc := testPipelineConfig()
	pc.Tenants = ts
	sc := DefaultConfig()
	sc.Tenants = ts
	e := start(t, pc, sc, nil)
	for i := range 2 {
		if r := e.postOrg(t, "noisy", ctProto, body); r.status != 200 {
			t.Fatalf("noisy request %d within the burst: %d", i, r.status)
		}
	}
	for i := range 3 {
		r := e.postOrg(t, "noisy", ctProto, body)
		st := status(t, r.body)
		ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if r.status != 429 || codes.Code(st.Code) != codes.ResourceExhausted || ra < 1 || ra > 10 || !strings.Contains(st.Message, "-tenant.rate") {
			t.Fatalf("noisy request %d over its rate: %d %v Retry-After %q", i, r.status, st, r.header.Get("Retry-After"))
		}
		if r := e.postOrg(t, "quiet", ctProto, traces(t, 4, 1)); r.status != 200 {
			t.Fatalf("another tenant's request %d: %d", i, r.status)
		}
	}
	if got := testutil.ToFloat64(ctr.refused[encProto][fastpath.Traces][admission.Throttled]); got < 3 {
		t.Fatalf("tenant_rate refusals counted %v, want 3", got)
	}
	if n := ts.All()[1].Throttled(); n != 3 {
		t.Fatalf("noisy throttled %d, want 3", n)
	}
}

// postFrom posts body as tenant org (none for "") from the loopback address src, with the
// Authorization value auth (none for "").
func (e *env) postFrom(t *testing.T, src, auth, org string, body []byte) response {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, e.url+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctProto)
	if org != "" {
		req.Header.Set("X-Scope-OrgID", org)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func startTenantsWith(t *testing.T, cfg tenant.Config) (*env, *tenant.Table) {
	t.Helper()
	ts, err := tenant.NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc := testPipelineConfig()
	pc.Tenants = ts
	sc := DefaultConfig()
	sc.Tenants = ts
	return start(t, pc, sc, nil), ts
}

// One client address takes no more than -intake.max-tenants-per-peer places: past them its
// new values are answered 403 (RESOURCE_EXHAUSTED, counted as tenant_refused) while known
// tenants are served to it, and a client at another address brings a new tenant in.
func TestTenantPerPeerHTTP(t *testing.T) {
	e, ts := startTenantsWith(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 100, MaxPerPeer: 2})
	body := traces(t, 2, 1)
	for _, org := range []string{"s1", "s2"} {
		if r := e.postFrom(t, "127.0.0.2", "", org, body); r.status != 200 {
			t.Fatalf("%s: %d", org, r.status)
		}
	}
	before := testutil.ToFloat64(ctr.rejected[rejectTenant])
	r := e.postFrom(t, "127.0.0.2", "", "s3", body)
	if st := status(t, r.body); r.status != 403 || codes.Code(st.Code) != codes.ResourceExhausted || !strings.Contains(st.Message, "-intake.max-tenants-per-peer") {
		t.Fatalf("a third new value from one address: %d %v", r.status, st)
	}
	if got := testutil.ToFloat64(ctr.rejected[rejectTenant]) - before; got != 1 {
		t.Fatalf("tenant_refused counted %v, want 1", got)
	}
	if r := e.postFrom(t, "127.0.0.3", "", "newcomer", body); r.status != 200 {
		t.Fatalf("a new tenant from another address: %d %q", r.status, r.body)
	}
	if r := e.postFrom(t, "127.0.0.2", "", "newcomer", body); r.status != 200 {
		t.Fatalf("a known tenant from the address at its bound: %d", r.status)
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

// With -auth.tenants-file a request's tenant is its token's: a header that repeats it is fine,
// one that names another tenant is 403 (PERMISSION_DENIED, tenant_refused), a request without
// a known token 401 with WWW-Authenticate (unauthenticated); nothing refused reaches a batch.
func TestTenantCredentialsHTTP(t *testing.T) {
	e, ts := startTenantsWith(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	if err := ts.SetCredentials([]tenant.Credential{{Token: "tok-acme", Values: []string{"acme"}}, {Token: "tok-beta", Values: []string{"beta"}}}); err != nil {
		t.Fatal(err)
	}
	body := traces(t, 2, 1)
	tenantBefore := testutil.ToFloat64(ctr.rejected[rejectTenant])
	authBefore := testutil.ToFloat64(ctr.rejected[rejectUnauthenticated])
	for _, c := range []struct {
		auth, org string
		status    int
		code      codes.Code
	}{
		{"Bearer tok-acme", "", 200, 0},
		{"Bearer tok-acme", "acme", 200, 0},
		{"bearer tok-beta", "", 200, 0},
		{"Bearer tok-acme", "beta", 403, codes.PermissionDenied},
		{"", "acme", 401, codes.Unauthenticated},
		{"Bearer tok-gamma", "", 401, codes.Unauthenticated},
	} {
		r := e.postFrom(t, "127.0.0.1", c.auth, c.org, body)
		if r.status != c.status {
			t.Errorf("%q claiming %q: %d, want %d", c.auth, c.org, r.status, c.status)
			continue
		}
		if c.status == 200 {
			continue
		}
		if st := status(t, r.body); codes.Code(st.Code) != c.code || !strings.Contains(st.Message, "-auth.tenants-file") {
			t.Errorf("%q claiming %q: %v", c.auth, c.org, st)
		}
		if c.status == 401 && r.header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%q: WWW-Authenticate %q", c.auth, r.header.Get("WWW-Authenticate"))
		}
	}
	// Without a credential, a request of a Content-Type the intake does not take is told it is
	// unauthenticated, not which types are taken.
	hdr := map[string]string{"Content-Type": "text/plain", "Authorization": "Bearer tok-gamma"}
	if r := e.do(t, http.MethodPost, "/v1/traces", hdr, body); r.status != 401 || r.header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("text/plain without a credential: %d (WWW-Authenticate %q), want 401", r.status, r.header.Get("WWW-Authenticate"))
	}
	if got := testutil.ToFloat64(ctr.rejected[rejectTenant]) - tenantBefore; got != 1 {
		t.Errorf("tenant_refused counted %v, want 1", got)
	}
	if got := testutil.ToFloat64(ctr.rejected[rejectUnauthenticated]) - authBefore; got != 3 {
		t.Errorf("unauthenticated counted %v, want 3", got)
	}
	e.p.Flush()
	count := map[string]int{}
	for _, g := range e.rec.Received() {
		count[g.Tenant] += bytes.Count(g.Body, body)
	}
	if len(count) != 2 || count["acme"] != 2 || count["beta"] != 1 {
		t.Fatalf("requests by tenant %v, want acme 2 and beta 1", count)
	}
}
