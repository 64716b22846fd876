package httpserver

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/admission"
)

func startTenants(t *testing.T, max int, routes ...fastpath.Match) *env {
	t.Helper()
	ts, err := fastpath.NewTenants(fastpath.TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: max, Routes: routes})
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
	e := startTenants(t, 2, fastpath.Match{Header: "x-scope-orgid"})
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

	o := startTenants(t, 10, fastpath.Match{Header: "x-scope-orgid", Values: []string{"acme"}})
	if r := o.postOrg(t, "beta", ctProto, body); r.status != 403 || codes.Code(status(t, r.body).Code) != codes.PermissionDenied {
		t.Fatalf("a tenant no destination takes: %d", r.status)
	}
}

// A tenant over -tenant.rate is answered 429 with Retry-After, protobuf and JSON alike, while
// another tenant's requests between its refusals are all served.
func TestTenantRateHTTP(t *testing.T) {
	body := traces(t, 3, 10) // 10 spans
	ts, err := fastpath.NewTenants(fastpath.TenantsConfig{Headers: []string{"x-scope-orgid"}, Max: 10,
		Rate: fastpath.TenantRate{PerSecond: 1, Burst: 20, Items: true}})
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
