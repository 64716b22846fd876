package gateway

import (
	"testing"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// The destinations' match-header become the tenant routes, in the order the gateway numbers
// the destinations (the -dest values, then Extra, which take the rest); without any
// match-header there are no routes: every destination takes every tenant.
func TestTenantRoutes(t *testing.T) {
	c := DefaultConfig()
	c.Tenants.Headers = []string{"x-scope-orgid"}
	c.Dests = []string{
		"name=a,endpoint=x:1,protocol=v1,mode=unary,match-header=x-scope-orgid:acme|beta,forward-headers=x-scope-orgid",
		"name=b,endpoint=y:1",
	}
	c.Extra = []fastpath.Destination{&testkit.Recorder{}}
	dests, err := c.AllDestinations()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := c.tenantConfig(dests)
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Routes) != 3 || tc.Routes[0].String() != "x-scope-orgid:acme|beta" || tc.Routes[1].Header != "" || tc.Routes[2].Header != "" {
		t.Fatalf("routes %+v", tc.Routes)
	}
	c.Dests = []string{"name=a,endpoint=x:1", "name=b,endpoint=y:1"}
	dests, _ = c.AllDestinations()
	if tc, err := c.tenantConfig(dests); err != nil || tc.Routes != nil {
		t.Fatalf("without match-header: routes %+v, %v", tc.Routes, err)
	}
	off := DefaultConfig()
	if tc, err := off.tenantConfig([]client.Config{{Name: "a"}}); err != nil || len(tc.Headers) != 0 {
		t.Fatalf("tenants off: %+v %v", tc, err)
	}
}
