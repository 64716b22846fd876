package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
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
	c.Extra = []pipeline.Destination{&testkit.Recorder{}}
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

// -auth.tenants-file is read into the table; a file that cannot be used names its line and no
// token, and keeps the tokens in force.
func TestLoadTenantsFile(t *testing.T) {
	ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# tenants\ns3cret-a x-scope-orgid=acme, x-region=eu\n")
	if n, err := loadTenantsFile(ts, path); err != nil || n != 1 {
		t.Fatalf("%d tokens, %v", n, err)
	}
	lookup := func() (*tenant.Tenant, error) {
		var k tenant.Key
		ts.AddClaimString(&k, "")
		ts.AddClaimString(&k, "")
		return ts.LookupCredentialString("Bearer s3cret-a", &k)
	}
	if tn, err := lookup(); err != nil || tn.String() != "acme|eu" {
		t.Fatalf("%v, %v", tn, err)
	}
	for content, want := range map[string]string{
		"s3cret-b x-other=1\n":                       `-auth.tenants-file line 1: "x-other" is not one of -intake.headers`,
		"# c\ns3cret-b\n":                            "-auth.tenants-file: tokens file line 2: want a token",
		"s3cret-b x-region=\x01\n":                   "-auth.tenants-file line 1: value",
		"s3cret-b x-region=a\ns3cret-b x-region=b\n": "-auth.tenants-file: tokens file line 2: the token of line 1 again",
	} {
		write(content)
		_, err := loadTenantsFile(ts, path)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: %v, want %q and no token", content, err, want)
		}
		if _, err := lookup(); err != nil {
			t.Fatalf("a refused file dropped the tokens in force: %v", err)
		}
	}
}
