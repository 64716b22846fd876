package pipeline

import (
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// openSet is the open batches of one signal: one per tenant, since a batch never mixes
// tenants (-intake.headers), and apart from those one per tenant and encoding for the
// pass-through batches (passthrough.go), whose bytes are compressed requests that no plain
// request may join. Each of these is a byTenant. With routes (Config.Router) a batch is also of
// one route, the destinations that take it: those batches sit in routed, by tenant and route; a
// map, since a request finds its pieces' batches by both, and a map whose keys come back
// allocates nothing once it has grown. Routed batches are plain: a request that may be split
// by route never passes through.
//
// A tenant that leaves its table (-intake.tenant-idle, tenantidle.go) gives its id to a later
// one, so an id alone does not name a tenant: every batch but the default tenant's pins its
// tenant while it is open, pass-through batches too, which keeps the tenant in the table, and a
// batch opened for a tenant that has left already sits in its byTenant's stray, by pointer,
// found by no id.
//
// Invariants:
//  0. a batch with a route is in routed under its tenant and route, and nowhere else; a batch
//     of encoding e other than EncodingNone is in wire[e], and nowhere else; any other batch is
//     in plain.
//  1. every batch in routed and in a byTenant other than the default tenant's holds one pin of
//     its tenant (Tenant.pin).
//
// Guarded by the signal's lock.
type openSet struct {
	plain  byTenant
	routed map[routeKey]*Batch
	// wire is the open pass-through batches of each encoding; slot EncodingNone is never used.
	wire [numEncodings]byTenant
}

// byTenant is one open batch per tenant. Without tenants, and for the default tenant, it is
// the one field def, as it was before tenants existed; the others' batches sit in a dense list
// found through a table indexed by tenant id, so that finding a known tenant's batch costs an
// index and no allocation.
//
// Invariants:
//  1. other holds no nil and no two batches of one tenant; slot[id] is 1 + the index in other
//     of the batch of tenant id, 0 when it has none.
//  2. def's tenant is nil or has id 0; every batch in other has a tenant with id > 0, in its
//     table; every batch in stray has an expired tenant.
type byTenant struct {
	def   *Batch
	other []*Batch
	slot  []int32
	stray map[*tenant.Tenant]*Batch
}

type routeKey struct {
	t     *tenant.Tenant
	route uint64
}

func isDefault(t *tenant.Tenant) bool { return t == nil || t.ID() == 0 }

// getRoute returns the open batch of t and route, or nil.
func (o *openSet) getRoute(t *tenant.Tenant, route uint64) *Batch {
	return o.routed[routeKey{t, route}]
}

// get returns t's open plain batch, or nil.
func (o *openSet) get(t *tenant.Tenant) *Batch { return o.plain.get(t) }

// getWire returns t's open pass-through batch of enc, or nil.
func (o *openSet) getWire(t *tenant.Tenant, enc Encoding) *Batch { return o.wire[enc].get(t) }

// lane is the byTenant a batch of enc (without a route) belongs in.
func (o *openSet) lane(enc Encoding) *byTenant {
	if enc == EncodingNone {
		return &o.plain
	}
	return &o.wire[enc]
}

// put makes b the open batch of its tenant, route and encoding, which has none.
func (o *openSet) put(b *Batch) {
	t := b.Tenant
	live := isDefault(t) || t.Pin()
	if b.route != 0 {
		if o.routed == nil {
			o.routed = map[routeKey]*Batch{}
		}
		o.routed[routeKey{t, b.route}] = b
		return
	}
	o.lane(b.Encoding).put(b, live)
}

// remove takes b, an open batch, out of the set.
func (o *openSet) remove(b *Batch) {
	t := b.Tenant
	if !isDefault(t) {
		// A pinned tenant cannot expire: expired now means expired when b was put.
		defer t.Unpin()
	}
	if b.route != 0 {
		delete(o.routed, routeKey{t, b.route})
		return
	}
	o.lane(b.Encoding).remove(b)
}

// empty reports whether no batch is open.
func (o *openSet) empty() bool { return o.len() == 0 }

// len is the number of open batches.
func (o *openSet) len() int {
	n := o.plain.len() + len(o.routed)
	for e := EncodingNone + 1; e < numEncodings; e++ {
		n += o.wire[e].len()
	}
	return n
}

// takeBornBy removes and returns an open batch born at or before cutoff (unix nanoseconds),
// or nil when there is none.
func (o *openSet) takeBornBy(cutoff int64) *Batch {
	b := o.plain.bornBy(cutoff)
	for e := EncodingNone + 1; b == nil && e < numEncodings; e++ {
		b = o.wire[e].bornBy(cutoff)
	}
	if b == nil {
		for _, rb := range o.routed {
			if rb.born <= cutoff {
				b = rb
				break
			}
		}
	}
	if b != nil {
		o.remove(b)
	}
	return b
}

// oldest returns when the oldest open batch was born (unix nanoseconds); false when none is
// open.
func (o *openSet) oldest() (int64, bool) {
	born, ok := o.plain.oldest()
	for e := EncodingNone + 1; e < numEncodings; e++ {
		if b, bok := o.wire[e].oldest(); bok && (!ok || b < born) {
			born, ok = b, true
		}
	}
	for _, rb := range o.routed {
		if !ok || rb.born < born {
			born, ok = rb.born, true
		}
	}
	return born, ok
}

// get returns t's open batch, or nil.
func (l *byTenant) get(t *tenant.Tenant) *Batch {
	if isDefault(t) {
		return l.def
	}
	if int(t.ID()) < len(l.slot) {
		// The slot may be of a later tenant with t's id when t has left its table.
		if i := l.slot[t.ID()]; i > 0 && l.other[i-1].Tenant == t {
			return l.other[i-1]
		}
	}
	return l.stray[t]
}

// put makes b the open batch of its tenant, which has none; live reports whether its tenant
// (not the default) was still in its table when b pinned it.
func (l *byTenant) put(b *Batch, live bool) {
	t := b.Tenant
	if isDefault(t) {
		l.def = b
		return
	}
	if !live {
		if l.stray == nil {
			l.stray = map[*tenant.Tenant]*Batch{}
		}
		l.stray[t] = b
		return
	}
	if int(t.ID()) >= len(l.slot) {
		// Grows once per new tenant id at most: a tenant seen before finds its slot.
		l.slot = append(l.slot, make([]int32, int(t.ID())+1-len(l.slot))...)
	}
	l.other = append(l.other, b)
	l.slot[t.ID()] = int32(len(l.other))
}

// remove takes b, an open batch of l, out of it.
func (l *byTenant) remove(b *Batch) {
	t := b.Tenant
	if isDefault(t) {
		l.def = nil
		return
	}
	if t.Expired() {
		delete(l.stray, t)
		return
	}
	i := l.slot[t.ID()] - 1
	last := len(l.other) - 1
	if i != int32(last) {
		moved := l.other[last]
		l.other[i] = moved
		l.slot[moved.Tenant.ID()] = i + 1
	}
	l.other[last] = nil
	l.other = l.other[:last]
	l.slot[t.ID()] = 0
}

// len is the number of batches in l.
func (l *byTenant) len() int {
	n := len(l.other) + len(l.stray)
	if l.def != nil {
		n++
	}
	return n
}

// bornBy returns a batch of l born at or before cutoff, or nil; it stays in l.
func (l *byTenant) bornBy(cutoff int64) *Batch {
	if b := l.def; b != nil && b.born <= cutoff {
		return b
	}
	for i := len(l.other) - 1; i >= 0; i-- {
		if b := l.other[i]; b.born <= cutoff {
			return b
		}
	}
	for _, b := range l.stray {
		if b.born <= cutoff {
			return b
		}
	}
	return nil
}

// oldest returns when l's oldest batch was born; false when l is empty.
func (l *byTenant) oldest() (born int64, ok bool) {
	if b := l.def; b != nil {
		born, ok = b.born, true
	}
	for _, b := range l.other {
		if !ok || b.born < born {
			born, ok = b.born, true
		}
	}
	for _, b := range l.stray {
		if !ok || b.born < born {
			born, ok = b.born, true
		}
	}
	return born, ok
}
