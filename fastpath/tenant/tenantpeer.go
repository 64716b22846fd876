package tenant

import "net/netip"

// Tenants per client address (-intake.max-tenants-per-peer). Without credentials
// (tenantcreds.go) a tenant is whatever a client claims, and the table has room for Max of
// them: one client sending a new value per request would take every place in a fraction of a
// second, and every new tenant after it would be refused for as long as it kept its values in
// use. So each tenant is charged to the client address that brought it into the table until it
// leaves (-intake.tenant-idle), and an address holding MaxPerPeer of them is refused new ones
// while the tenants it already brought, and those others brought, are served as before. Known
// tenants are never refused for it, whoever sends them.
//
// An IPv6 client is charged by its /64, the block a single host is usually given: one host
// choosing a new address per connection is still one peer. Clients behind one proxy or NAT
// share its address; raise the bound (or set 0) for an edge that serves them, such as a
// Collector forwarding many tenants.

// peerOf is the address a tenant is charged to: IPv4 as it is, IPv6 by its /64, none for an
// address that names no client (a unix socket's, or none).
func peerOf(a netip.Addr) netip.Addr {
	a = a.Unmap()
	switch {
	case !a.IsValid() || a.IsUnspecified():
		return netip.Addr{}
	case a.Is6():
		p, _ := a.WithZone("").Prefix(64)
		return p.Addr()
	}
	return a
}

// roomForPeerLocked reports whether peer may bring one more tenant into the table. A peer at
// its bound first has its idle tenants swept out, as a full table has (tenantidle.go).
func (ts *Table) roomForPeerLocked(peer netip.Addr) bool {
	if ts.cfg.MaxPerPeer == 0 || !peer.IsValid() || ts.mu.peers[peer] < ts.cfg.MaxPerPeer {
		return true
	}
	if ts.cfg.Idle > 0 {
		if n := ts.markIdleLocked(ts.clock()); n > 0 {
			ts.dropExpiredLocked(n)
		}
	}
	return ts.mu.peers[peer] < ts.cfg.MaxPerPeer
}

// chargePeerLocked charges t, new in the table, to its peer.
func (ts *Table) chargePeerLocked(t *Tenant) {
	if t.peer.IsValid() {
		ts.mu.peers[t.peer]++
	}
}

// releasePeerLocked takes t, leaving the table, off its peer's count.
func (ts *Table) releasePeerLocked(t *Tenant) {
	if !t.peer.IsValid() {
		return
	}
	if n := ts.mu.peers[t.peer] - 1; n > 0 {
		ts.mu.peers[t.peer] = n
	} else {
		delete(ts.mu.peers, t.peer)
	}
}

// PeerTenants returns how many of the table's tenants the client address peer brought (IPv6
// by its /64). Safe for concurrent use.
func (ts *Table) PeerTenants(peer netip.Addr) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.mu.peers[peerOf(peer)]
}
