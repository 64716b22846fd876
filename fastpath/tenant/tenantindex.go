package tenant

import (
	"hash/maphash"
	"sync/atomic"
)

// tenantIndex finds a tenant by its key with no lock and no allocation, and takes a new one
// in constant time (amortized): an open-addressing hash table of atomic slots, written only
// under the table's lock and read by any number of lookups at once. A table that copied a map
// on every new tenant cost each one the whole table: a client sending new values, or a
// legitimate churn of tenants, then spent the table's size in CPU and garbage per request,
// under the lock every other new tenant waits for.
//
// Invariants (the writer holds Table.mu):
//  1. a slot is nil (never used), the tombstone (its tenant left), or a tenant in the table;
//     at most one slot holds a given key.
//  2. filled, the slots that are not nil, is at most half the slots: every probe ends at a nil
//     slot, so a lookup of a key that is not there stops, and probes stay short.
//  3. a slot goes from nil to a tenant, from a tenant to the tombstone, and from the tombstone
//     to a tenant, never back to nil: a lookup probing past a slot cannot miss a key placed
//     beyond it.
//  4. a grown index is a new tenantIndex, published whole once filled (Table.index): a
//     lookup holding the old one finds what was in it when it was replaced, which is all a
//     lookup racing an insert can expect; a tenant swept from the new one after that reads
//     as expired (Tenant.expired), and its caller interns the values again.
type tenantIndex struct {
	seed  maphash.Seed
	mask  uint64
	slots []atomic.Pointer[Tenant]
	// filled and live count the slots that are not nil and those that hold a tenant. Written
	// under the table's lock; live is read by Len without it.
	filled int
	live   atomic.Int64
}

// tombstone marks a slot whose tenant left the table: probes go past it, inserts reuse it.
var tombstone = &Tenant{}

// minIndexSlots is the size of a new index.
const minIndexSlots = 16

func newTenantIndex(seed maphash.Seed, slots int) *tenantIndex {
	n := minIndexSlots
	for n < slots {
		n *= 2
	}
	return &tenantIndex{seed: seed, mask: uint64(n - 1), slots: make([]atomic.Pointer[Tenant], n)}
}

// find returns the tenant of key, nil when the index does not hold it. Safe for concurrent
// use; allocates nothing.
func (x *tenantIndex) find(key []byte) *Tenant {
	for i := maphash.Bytes(x.seed, key) & x.mask; ; i = (i + 1) & x.mask {
		t := x.slots[i].Load()
		if t == nil {
			return nil
		}
		if t != tombstone && t.key == string(key) {
			return t
		}
	}
}

// addLocked adds t, whose key the index does not hold, and returns the index that holds it:
// x, or a larger one (or one without its tombstones) when x was half filled, which the caller
// publishes. Called with the table's lock held.
func (x *tenantIndex) addLocked(t *Tenant) *tenantIndex {
	if (x.filled+1)*2 > len(x.slots) {
		// Four times the tenants: the next rebuild is a quarter of the slots of inserts
		// away, which pays for this one.
		n := newTenantIndex(x.seed, int(x.live.Load()+1)*4)
		for i := range x.slots {
			if o := x.slots[i].Load(); o != nil && o != tombstone {
				n.place(o)
			}
		}
		x = n
	}
	x.place(t)
	return x
}

// place puts t in the first free slot of its probe sequence.
func (x *tenantIndex) place(t *Tenant) {
	for i := maphash.String(x.seed, t.key) & x.mask; ; i = (i + 1) & x.mask {
		switch x.slots[i].Load() {
		case nil:
			x.filled++
			fallthrough
		case tombstone:
			x.slots[i].Store(t)
			x.live.Add(1)
			return
		}
	}
}

// removeLocked takes t out of the index, leaving its slot a tombstone. Called with the
// table's lock held.
func (x *tenantIndex) removeLocked(t *Tenant) {
	for i := maphash.String(x.seed, t.key) & x.mask; ; i = (i + 1) & x.mask {
		switch x.slots[i].Load() {
		case nil:
			panic("BUG: fastpath: a tenant of the table is not in its index")
		case t:
			x.slots[i].Store(tombstone)
			x.live.Add(-1)
			return
		}
	}
}

// len returns how many tenants the index holds. Safe for concurrent use.
func (x *tenantIndex) len() int { return int(x.live.Load()) }
