package httpserver

import (
	"github.com/valyala/fasthttp"

	"github.com/otlpgate/otlpgate/fastpath"
)

// tenant reads the request's tenant (-intake.headers) from its headers, before its body: a
// request the tenant table refuses is answered with the reply returned, and its body is not
// read. A known tenant costs a header lookup per name and no allocation.
func (s *Server) tenant(hdr *fasthttp.RequestHeader) (*fastpath.Tenant, *reply) {
	ts := s.cfg.Tenants
	if ts == nil {
		return nil, nil
	}
	var k fastpath.TenantKey
	for _, h := range ts.Headers() {
		ts.Add(&k, hdr.Peek(h))
	}
	t, err := ts.Lookup(&k)
	switch err {
	case nil:
		return t, nil
	case fastpath.ErrTooManyTenants:
		return nil, s.replies.tooManyTenants
	case fastpath.ErrNoRoute:
		return nil, s.replies.noRoute
	}
	return nil, s.replies.badTenant
}
