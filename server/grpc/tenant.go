package grpcserver

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Tenants (-intake.headers) are read from a call's metadata once per call (once per stream:
// a stream's metadata comes with its headers), before its first message.
//
// grpc-go keeps a call's incoming metadata in its context under a key of an unexported type,
// and hands it out only as a copy (metadata.FromIncomingContext copies the whole map,
// ValueFromIncomingContext the values it returns): an allocation per call for what is a read.
// incomingKey is that key, learnt once from a context metadata.NewIncomingContext made, so
// that the map grpc-go filed is read in place. If a grpc-go release files metadata another
// way, the self-check fails and the copying accessor is used instead: slower, never wrong.
var incomingKey = findIncomingKey()

// findIncomingKey returns the key metadata.NewIncomingContext stores metadata under, or nil
// when it cannot be found or does not read back what was stored.
func findIncomingKey() any {
	want := metadata.MD{"x-probe": {"1"}}
	ctx := metadata.NewIncomingContext(context.Background(), want)
	v := reflect.ValueOf(ctx)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("key")
	if !f.IsValid() || f.Kind() != reflect.Interface || f.IsNil() {
		return nil
	}
	kt := f.Elem().Type()
	if !kt.Comparable() || kt.Size() != 0 {
		return nil // a key with state could not be made again from its type alone
	}
	key := reflect.New(kt).Elem().Interface()
	got, ok := ctx.Value(key).(metadata.MD)
	if !ok || len(got["x-probe"]) != 1 || &got["x-probe"][0] != &want["x-probe"][0] {
		return nil
	}
	return key
}

// incomingMD returns the call's metadata as grpc-go filed it. It must not be modified.
func incomingMD(ctx context.Context) metadata.MD {
	if incomingKey != nil {
		md, _ := ctx.Value(incomingKey).(metadata.MD)
		return md
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return md
}

var (
	errTooManyTenants = status.Error(codes.ResourceExhausted, "too many distinct tenant header values (-intake.max-tenants reached): a new value is refused until a known one has been idle for -intake.tenant-idle")
	errBadTenant      = status.Error(codes.InvalidArgument, "a tenant header value is longer than 255 bytes or not printable ASCII")
	errNoRoute        = status.Error(codes.PermissionDenied, "no destination takes this tenant header value (match-header)")
	// The same words as the OTLP/HTTP intake's (server/http/reply.go).
	errPeerTenants = status.Error(codes.ResourceExhausted, "this client address brought too many distinct tenant header values (-intake.max-tenants-per-peer reached): a new value is refused until one of them has been idle for -intake.tenant-idle")
	errCredential  = status.Error(codes.Unauthenticated, "missing or unknown bearer token (-auth.tenants-file)")
	errTenantClaim = status.Error(codes.PermissionDenied, "the tenant headers do not match the bearer token's tenant (-auth.tenants-file): send the token's values or leave the headers out")
)

// throttled is the status of a v1 call whose tenant is over its rate (-tenant.rate):
// RESOURCE_EXHAUSTED with RetryInfo, which OTLP clients retry after the delay. It allocates,
// as the overload answer does: a tenant over its rate is told once per request it sends.
func throttled(d time.Duration) error {
	st := status.New(codes.ResourceExhausted, "the tenant is over its rate (-tenant.rate): retry after the given delay")
	if dd, err := st.WithDetails(retryInfo(d)); err == nil {
		st = dd
	}
	return st.Err()
}

// maxRetryDelayMs bounds the retry_delay_ms of an OTEP answer, so that an answer fits its slot
// (answers.go): about three days.
const maxRetryDelayMs = 1<<28 - 1

// retryDelayMs is d as an OTEP answer's retry_delay_ms, rounded up.
func retryDelayMs(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return min(uint64((d+time.Millisecond-1)/time.Millisecond), maxRetryDelayMs)
}

// origin returns the call's client address and tenant (nil without tenants), or the status
// that refuses the call: with -auth.tenants-file the tenant its bearer token is bound to, else
// the one its headers name, charged to the client's address when it is new
// (-intake.max-tenants-per-peer). A header sent several times counts with its first value. A
// known tenant costs no allocation.
func (s *Server) origin(ctx context.Context) (pipeline.Origin, error) {
	return s.originMeta(mdMeta(incomingMD(ctx)), peerAddr(ctx))
}

// originMeta is origin for a call with the headers m from the client address peer, the step
// both transports take.
func (s *Server) originMeta(m callMeta, peer netip.Addr) (pipeline.Origin, error) {
	o := pipeline.Origin{Peer: peer}
	t, err := s.tenant(m, peer)
	o.Tenant = t
	return o, err
}

// tenant is origin's tenant, for a call with the headers m from the client address peer.
func (s *Server) tenant(m callMeta, peer netip.Addr) (*tenant.Tenant, error) {
	ts := s.cfg.Tenants
	if ts == nil {
		return nil, nil
	}
	var k tenant.Key
	var t *tenant.Tenant
	var err error
	if ts.Bound() {
		for _, h := range ts.Headers() {
			ts.AddClaimString(&k, firstValue(m, h))
		}
		t, err = ts.LookupCredentialString(firstValue(m, "authorization"), &k)
	} else {
		for _, h := range ts.Headers() {
			ts.AddString(&k, firstValue(m, h))
		}
		t, err = ts.LookupFrom(&k, peer)
	}
	switch err {
	case nil:
		return t, nil
	case tenant.ErrTooMany:
		return nil, errTooManyTenants
	case tenant.ErrPeer:
		return nil, errPeerTenants
	case tenant.ErrNoRoute:
		return nil, errNoRoute
	case tenant.ErrCredential:
		return nil, errCredential
	case tenant.ErrClaim:
		return nil, errTenantClaim
	}
	return nil, errBadTenant
}

// peerAddr is the call's client address, invalid when it has none (a unix socket); an IPv4
// client of a dual-stack listener as IPv4.
func peerAddr(ctx context.Context) netip.Addr {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return netip.Addr{}
	}
	addr := p.Addr
	if a, ok := addr.(*connAddr); ok {
		// The intake limiter wraps every connection's address; parsing its String would
		// allocate on every call.
		addr = a.Addr
	}
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case nil:
		return netip.Addr{}
	}
	ap, _ := netip.ParseAddrPort(addr.String())
	return ap.Addr().Unmap()
}
