//go:build !race

package grpcserver

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Reading a known tenant from a call's metadata allocates nothing.
func TestTenantZeroAlloc(t *testing.T) {
	ts, err := fastpath.NewTenants(fastpath.TenantsConfig{Headers: []string{"x-scope-orgid", "x-region"}, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Tenants: ts}}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.MD{"x-scope-orgid": {"acme"}, ":authority": {"h"}})
	want, err := s.tenant(ctx)
	if err != nil || want.String() != "acme|" {
		t.Fatal(want, err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if got, err := s.tenant(ctx); got != want || err != nil {
			t.Fatal(got, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call", allocs)
	}
}
