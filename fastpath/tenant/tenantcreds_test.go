package tenant

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// credTenants returns a table with one header whose requests are bound to tokens.
func credTenants(t *testing.T, cfg Config, creds ...Credential) *Table {
	t.Helper()
	ts := newTenants(t, cfg)
	if err := ts.SetCredentials(creds); err != nil {
		t.Fatal(err)
	}
	return ts
}

func lookupCred(ts *Table, auth string, claims ...string) (*Tenant, error) {
	var k Key
	for _, v := range claims {
		ts.AddClaimString(&k, v)
	}
	return ts.LookupCredentialString(auth, &k)
}

// With credentials, a request's tenant is its token's: the header may repeat it or be left
// out, never name another; a request without a known token is refused. Each refusal is
// counted by its reason.
func TestTenantCredentials(t *testing.T) {
	ts := credTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10},
		Credential{Token: "tok-acme", Values: []string{"acme"}},
		Credential{Token: "tok-beta", Values: []string{"beta"}})
	if !ts.Bound() {
		t.Fatal("Bound is false with credentials set")
	}
	acme, err := lookupCred(ts, "Bearer tok-acme", "")
	if err != nil || acme.String() != "acme" {
		t.Fatalf("acme's token without a header: %v, %v", acme, err)
	}
	for _, auth := range []string{"Bearer tok-acme", "bearer tok-acme", "BEARER  tok-acme "} {
		if got, err := lookupCred(ts, auth, "acme"); err != nil || got != acme {
			t.Fatalf("%q claiming its own tenant: %v, %v", auth, got, err)
		}
	}
	claim := testutil.ToFloat64(tenantRefusedClaim)
	cred := testutil.ToFloat64(tenantRefusedCredential)
	for _, c := range []struct {
		auth, claim string
		want        error
	}{
		{"Bearer tok-acme", "beta", ErrClaim},
		{"Bearer tok-acme", "acme2", ErrClaim},
		{"Bearer tok-acme", "bad\x01", ErrClaim},
		{"", "acme", ErrCredential},
		{"Bearer ", "", ErrCredential},
		{"Bearer tok-acm", "", ErrCredential},
		{"Bearer tok-acme2", "", ErrCredential},
		{"Basic tok-acme", "", ErrCredential},
		{"tok-acme", "", ErrCredential},
		{"Bearer " + strings.Repeat("x", 2000), "", ErrCredential},
	} {
		if got, err := lookupCred(ts, c.auth, c.claim); !errors.Is(err, c.want) {
			t.Errorf("%.30q claiming %q: %v, %v; want %v", c.auth, c.claim, got, err, c.want)
		}
	}
	if got := testutil.ToFloat64(tenantRefusedClaim) - claim; got != 3 {
		t.Errorf("claim_mismatch refusals %v, want 3", got)
	}
	if got := testutil.ToFloat64(tenantRefusedCredential) - cred; got != 7 {
		t.Errorf("credential refusals %v, want 7", got)
	}
	beta, err := lookupCred(ts, "Bearer tok-beta", "beta")
	if err != nil || beta == acme || beta.String() != "beta" {
		t.Fatalf("beta: %v, %v", beta, err)
	}
	// The same tenant as a header-only lookup would intern: a spooled record reads back to it.
	if got, err := ts.FromRecord(acme.Record()); err != nil || got != acme {
		t.Fatalf("FromRecord of acme: %v, %v", got, err)
	}
	// A reload replaces the tokens: acme's old one is unknown, its new one is acme.
	if err := ts.SetCredentials([]Credential{{Token: "tok-acme-2", Values: []string{"acme"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := lookupCred(ts, "Bearer tok-acme", ""); !errors.Is(err, ErrCredential) {
		t.Fatalf("a token the reload removed: %v", err)
	}
	if got, err := lookupCred(ts, "Bearer tok-acme-2", ""); err != nil || got != acme {
		t.Fatalf("acme's new token: %v, %v", got, err)
	}
}

// The tokens file bounds the tenants it binds: they are never refused for -intake.max-tenants
// or -intake.max-tenants-per-peer, and charge no peer.
func TestTenantCredentialsPastBounds(t *testing.T) {
	var creds []Credential
	for _, v := range []string{"a", "b", "c", "d"} {
		creds = append(creds, Credential{Token: "tok-" + v, Values: []string{v}})
	}
	ts := credTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 2, MaxPerPeer: 1}, creds...)
	for _, c := range creds {
		if _, err := lookupCred(ts, "Bearer "+c.Token, ""); err != nil {
			t.Fatalf("%s: %v", c.Token, err)
		}
	}
	if ts.Len() != 5 {
		t.Fatalf("Len %d, want the default and 4", ts.Len())
	}
	// Unbound lookups still respect the bound.
	if _, err := lookupFrom(ts, netip.MustParseAddr("10.0.0.1"), "e"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a claimed tenant past the bound: %v", err)
	}
}

// Several headers: a token binds every one of them (NAME=VALUE pairs, a header left out has
// the default value), and a claim of any of them must agree.
func TestTenantCredentialsHeaders(t *testing.T) {
	ts := newTenants(t, Config{Headers: []string{"x-scope-orgid", "x-region"}, Default: "none", Max: 10})
	f := func(in string, want ...string) {
		t.Helper()
		got, err := ts.ParseCredentialTenant(in)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	f("x-scope-orgid=acme, x-region=eu", "acme", "eu")
	f("X-Region=us", "none", "us")
	for _, bad := range []string{"acme", "x-other=1", "x-region=a,x-region=b", "x-region=\x01"} {
		if _, err := ts.ParseCredentialTenant(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	one := newTenants(t, Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	if got, err := one.ParseCredentialTenant("  a=b, c  "); err != nil || !slices.Equal(got, []string{"a=b, c"}) {
		t.Fatalf("one header takes the value whole: %q, %v", got, err)
	}
	if err := ts.SetCredentials([]Credential{{Token: "t1", Values: []string{"acme", "eu"}}}); err != nil {
		t.Fatal(err)
	}
	tn, err := lookupCred(ts, "Bearer t1", "", "eu")
	if err != nil || tn.String() != "acme|eu" {
		t.Fatalf("%v, %v", tn, err)
	}
	if _, err := lookupCred(ts, "Bearer t1", "acme", "us"); !errors.Is(err, ErrClaim) {
		t.Fatalf("a disagreeing second header: %v", err)
	}
	for _, bad := range [][]Credential{
		{{Token: "", Values: []string{"a", "b"}}},
		{{Token: "has space", Values: []string{"a", "b"}}},
		{{Token: "t", Values: []string{"a"}}},
		{{Token: "t", Values: []string{"a", "b"}}, {Token: "t", Values: []string{"c", "d"}}},
	} {
		if err := ts.SetCredentials(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// A refused set keeps the one in force.
	if _, err := lookupCred(ts, "Bearer t1", ""); err != nil {
		t.Fatalf("after a refused set: %v", err)
	}
}
