//go:build !race

package grpcserver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Reading a known tenant from a call's metadata allocates nothing.
func TestTenantZeroAlloc(t *testing.T) {
	ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Tenants: ts}}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.MD{"x-scope-orgid": {"acme"}, ":authority": {"h"}})
	want, err := s.origin(ctx)
	if err != nil || want.Tenant.String() != "acme|" {
		t.Fatal(want, err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if got, err := s.origin(ctx); got != want || err != nil {
			t.Fatal(got, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call", allocs)
	}
}

// Reading a known tenant charged to the client's address, or bound to the call's bearer
// token, allocates nothing either, with the address as a listener gives it and as the
// intake limiter's connections wrap it; nor does reading the address itself, which the
// processing steps are handed (-resource.from-peer).
func TestTenantPeerAndCredentialZeroAlloc(t *testing.T) {
	tcp := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 4242}
	for _, addr := range []net.Addr{tcp, &connAddr{Addr: tcp}} {
		t.Run(fmt.Sprintf("%T", addr), func(t *testing.T) { testTenantPeerAndCredentialZeroAlloc(t, addr) })
	}
}

func testTenantPeerAndCredentialZeroAlloc(t *testing.T, addr net.Addr) {
	open := func(bound bool) (*Server, context.Context) {
		ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10, MaxPerPeer: 5})
		if err != nil {
			t.Fatal(err)
		}
		md := metadata.MD{"x-scope-orgid": {"acme"}, "authorization": {"Bearer " + strings.Repeat("k", 64)}}
		if bound {
			if err := ts.SetCredentials([]tenant.Credential{{Token: strings.Repeat("k", 64), Values: []string{"acme"}}}); err != nil {
				t.Fatal(err)
			}
		}
		ctx := metadata.NewIncomingContext(context.Background(), md)
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: addr})
		return &Server{cfg: Config{Tenants: ts}}, ctx
	}
	for _, bound := range []bool{false, true} {
		s, ctx := open(bound)
		want, err := s.origin(ctx)
		if err != nil || want.Tenant.String() != "acme" || want.Peer != netip.MustParseAddr("192.0.2.7") {
			t.Fatal(want, err)
		}
		if !bound && s.cfg.Tenants.PeerTenants(netip.MustParseAddr("192.0.2.7")) != 1 {
			t.Fatal("the tenant was not charged to the call's address")
		}
		allocs := testing.AllocsPerRun(1000, func() {
			if got, err := s.origin(ctx); got != want || err != nil {
				t.Fatal(got, err)
			}
		})
		if allocs != 0 {
			t.Fatalf("bound %v: %v allocations per call", bound, allocs)
		}
	}
}
