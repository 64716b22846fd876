package pipeline

import (
	"net/netip"

	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// Origin is where a request came from, as its intake knows it: the tenant its headers name and
// the client address of its connection. It travels whole from the intake through admission to
// the processing steps, which may label the request's resources with the address
// (-resource.from-peer). A small value: passing it allocates nothing.
type Origin struct {
	// Tenant is the request's tenant (-intake.headers); nil is the default tenant.
	Tenant *tenant.Tenant
	// Peer is the client's IP address; invalid when the request has none (a unix socket's,
	// a record read back from the spool, which was processed before it was written).
	Peer netip.Addr
}
