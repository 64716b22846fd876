package fastpath

// openSet is the open batches of one signal: one per tenant, since a batch never mixes
// tenants (-intake.headers). Without tenants, and for the default tenant, it is the one field
// def, as it was before tenants existed; the others' batches sit in a dense list found through
// a table indexed by tenant id, so that finding a known tenant's batch costs an index and no
// allocation. Guarded by the signal's lock.
//
// With routes (Config.Router) a batch is also of one route, the destinations that take it:
// those batches sit in routed, by tenant and route; a map, since a request finds its pieces'
// batches by both, and a map whose keys come back allocates nothing once it has grown.
//
// A tenant that leaves its table (-intake.tenant-idle, tenantidle.go) gives its id to a later
// one, so an id alone does not name a tenant: every batch but the default tenant's pins its
// tenant while it is open, which keeps the tenant in the table, and a batch opened for a tenant
// that has left already sits in stray, by pointer, found by no id.
//
// Invariants:
//  0. a batch with a route is in routed under its tenant and route, and nowhere else.
//  1. other holds no nil and no two batches of one tenant; slot[id] is 1 + the index in other
//     of the batch of tenant id, 0 when it has none.
//  2. def's tenant is nil or has id 0; every batch in other has a tenant with id > 0, in its
//     table; every batch in stray has an expired tenant, and no route.
//  3. every batch in other, stray and routed holds one pin of its tenant (Tenant.pin).
type openSet struct {
	def    *Batch
	other  []*Batch
	slot   []int32
	routed map[routeKey]*Batch
	stray  map[*Tenant]*Batch
	// wire is the default tenant's open pass-through batch of each encoding (passthrough.go);
	// slot EncodingNone is never used.
	wire [numEncodings]*Batch
}

type routeKey struct {
	t     *Tenant
	route uint64
}

// getRoute returns the open batch of t and route, or nil.
func (o *openSet) getRoute(t *Tenant, route uint64) *Batch {
	return o.routed[routeKey{t, route}]
}

func isDefault(t *Tenant) bool { return t == nil || t.id == 0 }

// get returns t's open batch, or nil.
func (o *openSet) get(t *Tenant) *Batch {
	if isDefault(t) {
		return o.def
	}
	if int(t.id) < len(o.slot) {
		// The slot may be of a later tenant with t's id when t has left its table.
		if i := o.slot[t.id]; i > 0 && o.other[i-1].Tenant == t {
			return o.other[i-1]
		}
	}
	return o.stray[t]
}

// put makes b the open batch of its tenant, which has none.
func (o *openSet) put(b *Batch) {
	t := b.Tenant
	live := isDefault(t) || t.pin()
	if b.route != 0 {
		if o.routed == nil {
			o.routed = map[routeKey]*Batch{}
		}
		o.routed[routeKey{t, b.route}] = b
		return
	}
	if isDefault(t) {
		o.def = b
		return
	}
	if !live {
		if o.stray == nil {
			o.stray = map[*Tenant]*Batch{}
		}
		o.stray[t] = b
		return
	}
	if int(t.id) >= len(o.slot) {
		// Grows once per new tenant id at most: a tenant seen before finds its slot.
		o.slot = append(o.slot, make([]int32, int(t.id)+1-len(o.slot))...)
	}
	o.other = append(o.other, b)
	o.slot[t.id] = int32(len(o.other))
}

// remove takes b, an open batch, out of the set.
func (o *openSet) remove(b *Batch) {
	if b.Encoding != EncodingNone {
		o.wire[b.Encoding] = nil
		return
	}
	t := b.Tenant
	if !isDefault(t) {
		// A pinned tenant cannot expire: expired now means expired when b was put.
		defer t.unpin()
	}
	if b.route != 0 {
		delete(o.routed, routeKey{t, b.route})
		return
	}
	if isDefault(t) {
		o.def = nil
		return
	}
	if t.expired() {
		delete(o.stray, t)
		return
	}
	i := o.slot[t.id] - 1
	last := len(o.other) - 1
	if i != int32(last) {
		moved := o.other[last]
		o.other[i] = moved
		o.slot[moved.Tenant.id] = i + 1
	}
	o.other[last] = nil
	o.other = o.other[:last]
	o.slot[t.id] = 0
}

// empty reports whether no batch is open.
func (o *openSet) empty() bool {
	return o.def == nil && len(o.other) == 0 && len(o.routed) == 0 && len(o.stray) == 0 && o.wire == [numEncodings]*Batch{}
}

// len is the number of open batches.
func (o *openSet) len() int {
	n := len(o.other) + len(o.routed) + len(o.stray)
	if o.def != nil {
		n++
	}
	for _, b := range o.wire {
		if b != nil {
			n++
		}
	}
	return n
}

// takeBornBy removes and returns an open batch born at or before cutoff (unix nanoseconds),
// or nil when there is none.
func (o *openSet) takeBornBy(cutoff int64) *Batch {
	if b := o.def; b != nil && b.born <= cutoff {
		o.def = nil
		return b
	}
	for e, b := range o.wire {
		if b != nil && b.born <= cutoff {
			o.wire[e] = nil
			return b
		}
	}
	for i := len(o.other) - 1; i >= 0; i-- {
		if b := o.other[i]; b.born <= cutoff {
			o.remove(b)
			return b
		}
	}
	for _, b := range o.routed {
		if b.born <= cutoff {
			o.remove(b)
			return b
		}
	}
	for _, b := range o.stray {
		if b.born <= cutoff {
			o.remove(b)
			return b
		}
	}
	return nil
}
