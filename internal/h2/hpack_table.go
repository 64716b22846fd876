package h2

// entryOverhead is what RFC 7541 §4.1 adds to an entry's name and value lengths for its size.
const entryOverhead = 32

// dynTable is HPACK's dynamic table (RFC 7541 §2.3.2, §4) held in memory allocated once, when
// the decoder is made, for the largest size the decoder allows (bound):
//
//  1. The entries' bytes (name then value) lie one after the other, oldest first, in a ring of
//     bound bytes; the ring is stored twice over (buf[i] == buf[i+bound]), so an entry that
//     wraps past the end is still one contiguous slice, buf[off:off+len] with off < bound.
//  2. The entries' descriptions are a ring too, ents[first] the oldest, n of them.
//  3. size is the table's size as §4.1 counts it; size <= max <= bound. Since each entry
//     counts 32 more than its bytes, the bytes in use stay below bound and a new entry's bytes
//     never reach the oldest entry's.
type dynTable struct {
	buf   []byte
	bound uint32
	ents  []entry
	first int
	n     int
	tail  uint32 // where the next entry's bytes go, < bound
	size  uint32
	max   uint32
}

type entry struct {
	off     uint32
	nameLen uint32
	valLen  uint32
	keep    int16 // the index of the entry's name among the kept names, or -1
	bin     uint8 // binNone, or whether its binary value decodes (Config.Binary)
	kind    uint8 // nameKindOf its name (Config.Request)
	ctl     bool  // its value holds an octet no value may hold (Config.Request)
}

func newDynTable(bound uint32) dynTable {
	return dynTable{
		buf:   make([]byte, 2*bound),
		bound: bound,
		ents:  make([]entry, bound/entryOverhead+1),
		max:   bound,
	}
}

// at returns the i-th entry, 0 the newest (HPACK index staticLen+1+i). i < t.n.
func (t *dynTable) at(i int) (e entry, name, value []byte) {
	k := t.first + t.n - 1 - i
	if k >= len(t.ents) {
		k -= len(t.ents)
	}
	e = t.ents[k]
	b := t.buf[e.off : e.off+e.nameLen+e.valLen]
	return e, b[:e.nameLen], b[e.nameLen:]
}

func (t *dynTable) evictOldest() {
	e := t.ents[t.first]
	t.size -= e.nameLen + e.valLen + entryOverhead
	t.first++
	if t.first == len(t.ents) {
		t.first = 0
	}
	t.n--
}

// clear evicts every entry: what adding an entry larger than the maximum size does (§4.4).
func (t *dynTable) clear() {
	for t.n > 0 {
		t.evictOldest()
	}
}

// setMax changes the table's maximum size (a size update, §4.3), evicting what no longer fits.
// max <= t.bound.
func (t *dynTable) setMax(max uint32) {
	t.max = max
	for t.size > t.max {
		t.evictOldest()
	}
}

// add inserts an entry whose name is the first nameLen bytes of b and whose value is the rest
// (§4.4): it evicts the oldest entries until the new one fits, or empties the table when it is
// larger than the maximum size. b must not alias the table (the name of an entry the addition
// evicts is copied before, by the caller).
func (t *dynTable) add(b []byte, nameLen uint32, keep int16, bin, kind uint8, ctl bool) {
	size := uint64(len(b)) + entryOverhead
	if size > uint64(t.max) {
		t.clear()
		return
	}
	for uint64(t.size)+size > uint64(t.max) {
		t.evictOldest()
	}
	off := t.tail
	t.put(off, b)
	t.tail = (off + uint32(len(b))) % t.bound
	k := t.first + t.n
	if k >= len(t.ents) {
		k -= len(t.ents)
	}
	t.ents[k] = entry{off: off, nameLen: nameLen, valLen: uint32(len(b)) - nameLen, keep: keep, bin: bin, kind: kind, ctl: ctl}
	t.n++
	t.size += uint32(size)
}

// put writes b at off in the ring and in its second copy.
func (t *dynTable) put(off uint32, b []byte) {
	for len(b) > 0 {
		k := copy(t.buf[off:t.bound], b)
		copy(t.buf[t.bound+off:], b[:k])
		b = b[k:]
		off = 0
	}
}
