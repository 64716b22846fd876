package pool

// FreeList recycles objects of one type through a bounded stack that garbage collection never
// empties.
//
// A sync.Pool gives up what it holds to the collector (the items of two collections ago), and a
// busy proxy collects every few hundred batches (gRPC's and net/http's garbage sees to that),
// so after each collection the first Gets of a sync.Pool make new objects: a cost charged to
// the code that calls Get, on the collector's schedule rather than the traffic's. A FreeList
// keeps up to its capacity of objects for good instead; objects put back beyond that are
// dropped for the collector. Its memory is what was once in use at the same time, up to the
// capacity, so the capacity is sized to what the code may hold in flight at once. The slots
// are made by NewFreeList, so Get and Put never allocate, except Get on an empty list.
//
// Callers reset an object before Put (getX/putX beside the type, as for any pool).
type FreeList[T any] struct {
	r    reserve[*T] // the bounded stack, as the byte tiers keep their reserves
	newT func() *T
}

// NewFreeList returns an empty list that keeps at most capacity objects and makes new ones
// with newT when empty (new(T) when newT is nil).
func NewFreeList[T any](capacity int, newT func() *T) *FreeList[T] {
	if capacity <= 0 {
		panic("BUG: pool: free list capacity must be positive")
	}
	if newT == nil {
		newT = func() *T { return new(T) }
	}
	l := &FreeList[T]{newT: newT}
	l.r.init(capacity)
	return l
}

// Get returns a kept object, or a new one when none is kept. Safe for concurrent use.
func (l *FreeList[T]) Get() *T {
	if v, ok := l.r.get(); ok {
		return v
	}
	return l.newT()
}

// Put keeps v for a later Get when there is room, and drops it for the collector otherwise.
// The caller must have reset v and must not touch it afterwards. Safe for concurrent use.
func (l *FreeList[T]) Put(v *T) { l.r.put(v) }

// Len returns the number of objects kept, for tests. Safe for concurrent use.
func (l *FreeList[T]) Len() int { return int(l.r.n.Load()) }
