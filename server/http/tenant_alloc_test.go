//go:build !race

package httpserver

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// With -intake.headers, a request of a known tenant through the handler into the pipeline
// allocates nothing either: its header is read in place and its batch found by the tenant's id.
func TestHandlerTenantAllocs(t *testing.T) {
	ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	h := &handlerHarness{sink: &testkit.Discard{}}
	pc := pipeline.DefaultConfig()
	pc.BatchMaxAge = 1 << 62
	pc.Tenants = ts
	if h.p, err = pipeline.New(pc, []pipeline.Destination{h.sink}); err != nil {
		t.Fatal(err)
	}
	defer h.p.Close()
	sc := DefaultConfig()
	sc.Tenants = ts
	if h.srv, err = New(sc, h.p, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	step := h.twoTenants(t, "", traces(t, 1, 20))
	if got := testing.AllocsPerRun(500, step); got != 0 {
		t.Errorf("%v allocs per two tenants' requests, want 0", got)
	}
	if ts.Len() != 3 {
		t.Errorf("tenants %d, want the default, acme and beta", ts.Len())
	}
}

// twoTenants returns a step that has h handle body (in encoding enc, "" for none) as tenant
// acme, then as tenant beta, each answered 200, after ten steps that warm the pools and the
// tenants' batch slots.
func (h *handlerHarness) twoTenants(t *testing.T, enc string, body []byte) func() {
	acme, beta := h.ctx(enc, body), h.ctx(enc, body)
	acme.Request.Header.Set("X-Scope-OrgID", "acme")
	beta.Request.Header.Set("X-Scope-OrgID", "beta")
	step := func() {
		h.srv.handle(acme)
		h.srv.handle(beta)
		if acme.Response.StatusCode() != 200 || beta.Response.StatusCode() != 200 {
			t.Fatalf("status %d %d", acme.Response.StatusCode(), beta.Response.StatusCode())
		}
		acme.Response.Reset()
		beta.Response.Reset()
	}
	for range 10 {
		step()
	}
	return step
}

// A known tenant charged to the client's address, or bound to the request's bearer token,
// through the handler into the pipeline allocates nothing either.
func TestHandlerTenantPeerAndCredentialAllocs(t *testing.T) {
	for _, bound := range []bool{false, true} {
		ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10, MaxPerPeer: 5})
		if err != nil {
			t.Fatal(err)
		}
		if bound {
			if err := ts.SetCredentials([]tenant.Credential{{Token: strings.Repeat("k", 64), Values: []string{"acme"}}}); err != nil {
				t.Fatal(err)
			}
		}
		h := &handlerHarness{sink: &testkit.Discard{}}
		pc := pipeline.DefaultConfig()
		pc.BatchMaxAge = 1 << 62
		pc.Tenants = ts
		if h.p, err = pipeline.New(pc, []pipeline.Destination{h.sink}); err != nil {
			t.Fatal(err)
		}
		sc := DefaultConfig()
		sc.Tenants = ts
		if h.srv, err = New(sc, h.p, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		ctx := h.ctx("", traces(t, 1, 20))
		ctx.Request.Header.Set("X-Scope-OrgID", "acme")
		ctx.Request.Header.Set("Authorization", "Bearer "+strings.Repeat("k", 64))
		step := func() {
			h.srv.handle(ctx)
			if ctx.Response.StatusCode() != 200 {
				t.Fatalf("bound %v: status %d %q", bound, ctx.Response.StatusCode(), ctx.Response.Body())
			}
			ctx.Response.Reset()
		}
		for range 10 {
			step()
		}
		if got := testing.AllocsPerRun(500, step); got != 0 {
			t.Errorf("bound %v: %v allocs per request, want 0", bound, got)
		}
		if !bound && ts.PeerTenants(netip.MustParseAddr("127.0.0.1")) != 1 {
			t.Error("the tenant was not charged to the request's address")
		}
		h.p.Close()
	}
}
