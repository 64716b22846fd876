package httpserver

import (
	"net/netip"

	"github.com/valyala/fasthttp"

	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// tenant reads the request's tenant (-intake.headers), from the client address peer, before its
// body: with
// -auth.tenants-file the tenant its bearer token is bound to, else the one its headers name,
// charged to the client's address when it is new (-intake.max-tenants-per-peer). A request the
// tenant table refuses is answered with the reply returned, counted under the reason returned,
// and its body is not read. A known tenant costs a header lookup per name and no allocation.
func (s *Server) tenant(ctx *fasthttp.RequestCtx, peer netip.Addr) (*tenant.Tenant, *reply, int) {
	ts := s.cfg.Tenants
	if ts == nil {
		return nil, nil, 0
	}
	hdr := &ctx.Request.Header
	var k tenant.Key
	var t *tenant.Tenant
	var err error
	if ts.Bound() {
		for _, h := range ts.Headers() {
			ts.AddClaim(&k, hdr.Peek(h))
		}
		t, err = ts.LookupCredential(hdr.Peek("Authorization"), &k)
	} else {
		for _, h := range ts.Headers() {
			ts.Add(&k, hdr.Peek(h))
		}
		t, err = ts.LookupFrom(&k, peer)
	}
	switch err {
	case nil:
		return t, nil, 0
	case tenant.ErrTooMany:
		return nil, s.replies.tooManyTenants, rejectTenant
	case tenant.ErrPeer:
		return nil, s.replies.peerTenants, rejectTenant
	case tenant.ErrNoRoute:
		return nil, s.replies.noRoute, rejectTenant
	case tenant.ErrCredential:
		return nil, s.replies.credential, rejectUnauthenticated
	case tenant.ErrClaim:
		return nil, s.replies.tenantClaim, rejectTenant
	}
	return nil, s.replies.badTenant, rejectTenant
}

// remoteAddr is the request's client address, invalid when it has none (a unix socket, which
// fasthttp reports as 0.0.0.0); an IPv4 client of a dual-stack listener as IPv4.
func remoteAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	a, _ := netip.AddrFromSlice(ctx.RemoteIP())
	if a.IsUnspecified() {
		return netip.Addr{}
	}
	return a.Unmap()
}
