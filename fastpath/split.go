package fastpath

import (
	"bytes"
	"errors"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/pool"
)

// SplitKey is what Split partitions a batch by. A balanced destination chooses it by name
// (client's -dest balance=).
type SplitKey uint8

const (
	// SplitTraceID sends every span of a trace to one part: each resource entry's scope
	// entries are split span by span on the span's trace_id. Log records go by their trace_id
	// when they carry one, by their resource otherwise. Metrics go by resource.
	SplitTraceID SplitKey = iota
	// SplitService sends each resource entry whole, by the value of its service.name
	// attribute (an entry without one goes with the other entries that lack it).
	SplitService
	// SplitResource sends each resource entry whole, by a hash of its attributes' bytes.
	SplitResource
	numSplitKeys
)

// Picker maps the 64-bit hash of a key to the part that owns it, in [0, n) for the n the
// Splitter was called with. It must not allocate: it runs once per key.
type Picker interface {
	Pick(key uint64) int
}

// MaxParts is the largest number of parts a batch is split into.
const MaxParts = 1024

// errParts is returned when Split is asked for more parts than MaxParts, or none.
var errParts = errors.New("fastpath: split into no part or more than MaxParts")

// Splitter partitions a sealed batch's v1 payload by key without decoding spans: it walks the
// resource entries, their scope entries and each item's key field (a span's or log record's
// trace_id), and copies the fields it keeps verbatim into one pooled payload per part. Within
// a part, items keep the order they had in the batch, so per-key order holds.
//
// Resource and scope headers (every field but the scope entries, and every field but the
// items) are re-emitted in each part that receives an item of them, before the items, in the
// order they came. A resource entry without any item goes whole to the owner of its resource.
// In a resource entry that is split, a scope entry without any item is left out of every part:
// it carries no telemetry, only its scope's name, version and schema URL. Otherwise a split
// entry differs from the original only by the order of its header fields relative to its
// items, which protobuf does not keep.
//
// A Splitter keeps scratch space across calls and allocates nothing once that space fits the
// batches it sees. It is not safe for concurrent use: pool it (GetSplitter, PutSplitter).
type Splitter struct {
	n      int
	hdrs   [][]byte   // raw header fields of resources and scopes
	scopes []scopeRef // scope entries of the resource entries being split
	items  []itemRef  // items of those scope entries
	res    []resRef
	// parts and counts are the result: a payload and an item count per part.
	parts  []*pool.Payload
	counts []int
	// The owner of the last item key, since consecutive items mostly share a trace.
	lastKey   []byte
	lastOwner int
}

type resRef struct {
	raw                []byte // the whole field: tag, length, entry
	hdrFrom, hdrTo     int32
	scopeFrom, scopeTo int32
	owner              int32 // -1: split item by item
	items              int32 // when owned whole
	itemsFrom, itemsTo int32
}

type scopeRef struct {
	hdrFrom, hdrTo   int32
	itemFrom, itemTo int32
}

type itemRef struct {
	raw   []byte // the whole field
	owner int32
}

var splitters = sync.Pool{New: func() any { return new(Splitter) }}

// GetSplitter returns a Splitter from the pool. Safe for concurrent use.
func GetSplitter() *Splitter { return splitters.Get().(*Splitter) }

// PutSplitter returns s to the pool; the parts of its last Partition must have been taken.
func PutSplitter(s *Splitter) {
	clear(s.parts)
	s.lastKey = nil
	clear(s.hdrs)
	clear(s.items)
	clear(s.res)
	splitters.Put(s)
}

// Fields of the resource entry, scope entry and item messages that the split reads. They are
// the same for ResourceSpans/ResourceLogs and ScopeSpans/ScopeLogs.
const (
	fEntryResource = 1 // Resource in Resource{Spans,Metrics,Logs}
	fEntryScopes   = 2 // Scope{Spans,Logs} in Resource{Spans,Logs}
	fScopeItems    = 2 // Span or LogRecord in Scope{Spans,Logs}
	fSpanTraceID   = 1 // Span.trace_id
	fLogTraceID    = 9 // LogRecord.trace_id
	fResourceAttrs = 1 // Resource.attributes
	fKVKey         = 1 // KeyValue.key
	fKVValue       = 2 // KeyValue.value
)

var serviceName = []byte("service.name")

// TakePart hands over part p of the last Partition: its payload (nil when it got nothing),
// which the caller now owns, and its item count.
func (s *Splitter) TakePart(p int) (*pool.Payload, int) {
	pl := s.parts[p]
	s.parts[p] = nil
	return pl, s.counts[p]
}

// hashSeed starts every key hash: FNV-1a's 64-bit offset basis. Keys must hash alike on every
// otlpgate of a fleet, so the hash is fixed, never seeded per process.
const hashSeed = 14695981039346656037

// hashBytes folds b into h with FNV-1a.
func hashBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// HashKey is the hash Split gives key: a trace id, a service.name value, resource attributes.
// Safe for concurrent use.
func HashKey(key []byte) uint64 { return hashBytes(hashSeed, key) }

// Partition partitions payload, a v1 request of sig, into n parts by key, asking pick for the
// owner of each key: it returns the one owner of everything, or -1 with the parts for
// TakePart (each a pooled payload of its own, nil where a part got nothing), valid until the
// next call.
func (s *Splitter) Partition(sig Signal, payload []byte, key SplitKey, n int, pick Picker) (int, error) {
	if n < 1 || n > MaxParts {
		return 0, errParts
	}
	if sig >= NumSignals {
		return 0, ErrSignal
	}
	s.n = n
	s.hdrs, s.scopes, s.items, s.res = s.hdrs[:0], s.scopes[:0], s.items[:0], s.res[:0]
	s.lastKey, s.lastOwner = nil, 0
	byItem := key == SplitTraceID && sig != Metrics
	keyField := protowire.Number(fSpanTraceID)
	if sig == Logs {
		keyField = fLogTraceID
	}
	owner, mixed := int32(-1), false
	note := func(o int32) {
		if owner < 0 {
			owner = o
		} else if o != owner {
			mixed = true
		}
	}
	// The top level goes through the one walker every other stage uses, so that a payload the
	// split accepts is one they accept too; the levels below are the split's own business.
	it := NewTopLevel(payload)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != 1 || f.Type != protowire.BytesType {
			// Batches hold only resource entries: intake strips every other top-level field.
			return 0, ErrWireType
		}
		raw, entry := payload[f.Tag:f.End], payload[f.Value:f.End]
		r := resRef{raw: raw, owner: -1}
		if !byItem {
			rk, err := resourceKey(entry, key)
			if err != nil {
				return 0, err
			}
			items, err := walkEntry(resourceMsg[sig], entry, false)
			if err != nil {
				return 0, err
			}
			r.owner, r.items = int32(pick.Pick(rk)), int32(items)
			note(r.owner)
			s.res = append(s.res, r)
			continue
		}
		if err := s.scanEntry(&r, entry, keyField, pick); err != nil {
			return 0, err
		}
		if r.owner >= 0 {
			note(r.owner)
		} else {
			for _, item := range s.items[r.itemsFrom:r.itemsTo] {
				note(item.owner)
			}
		}
		s.res = append(s.res, r)
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	if !mixed {
		return max(int(owner), 0), nil
	}
	s.build()
	return -1, nil
}

// scanEntry records the header fields, scope entries and items of one resource entry to be
// split by item key. An entry without any item is owned whole by its resource's owner; a scope
// entry without items inside an entry that has some is dropped (see Splitter).
func (s *Splitter) scanEntry(r *resRef, entry []byte, keyField protowire.Number, pick Picker) error {
	r.hdrFrom = int32(len(s.hdrs))
	r.scopeFrom = int32(len(s.scopes))
	r.itemsFrom = int32(len(s.items))
	// The resource key is needed for items without a trace id (logs) and for entries
	// without items; computed once, on first need.
	resKey, haveResKey := uint64(0), false
	resOwner := func() (int32, error) {
		if !haveResKey {
			k, err := resourceKey(entry, SplitResource)
			if err != nil {
				return 0, err
			}
			resKey, haveResKey = k, true
		}
		return int32(pick.Pick(resKey)), nil
	}
	for b := entry; len(b) > 0; {
		num, typ, tn, err := consumeTag(b)
		if err != nil {
			return err
		}
		vn, err := skipValue(b[tn:], typ)
		if err != nil {
			return err
		}
		field := b[:tn+vn]
		if num != fEntryScopes || typ != protowire.BytesType {
			s.hdrs = append(s.hdrs, field)
			b = b[tn+vn:]
			continue
		}
		p, _, _ := consumeLen(b[tn:]) // checked by skipValue
		scope := b[tn+p : tn+vn]
		b = b[tn+vn:]
		sc := scopeRef{itemFrom: int32(len(s.items))}
		// Header fields of the scope go to s.hdrs after its items were read: collect them in
		// a second pass, so that resource and scope headers do not interleave in s.hdrs.
		for c := scope; len(c) > 0; {
			num, typ, tn, err := consumeTag(c)
			if err != nil {
				return err
			}
			vn, err := skipValue(c[tn:], typ)
			if err != nil {
				return err
			}
			if num == fScopeItems && typ == protowire.BytesType {
				p, _, _ := consumeLen(c[tn:])
				key, err := itemKey(c[tn+p:tn+vn], keyField)
				if err != nil {
					return err
				}
				var o int32
				switch {
				case key == nil:
					if o, err = resOwner(); err != nil {
						return err
					}
				case s.lastKey != nil && bytes.Equal(key, s.lastKey):
					o = int32(s.lastOwner)
				default:
					o = int32(pick.Pick(hashBytes(hashSeed, key)))
					s.lastKey, s.lastOwner = key, int(o)
				}
				s.items = append(s.items, itemRef{raw: c[:tn+vn], owner: o})
			}
			c = c[tn+vn:]
		}
		sc.itemTo = int32(len(s.items))
		if sc.itemTo == sc.itemFrom {
			continue // a scope without items carries nothing to deliver
		}
		s.scopes = append(s.scopes, sc)
	}
	r.hdrTo = int32(len(s.hdrs))
	r.scopeTo = int32(len(s.scopes))
	r.itemsTo = int32(len(s.items))
	if r.itemsTo == r.itemsFrom {
		o, err := resOwner()
		if err != nil {
			return err
		}
		r.owner = o
		s.hdrs = s.hdrs[:r.hdrFrom]
		s.scopes = s.scopes[:r.scopeFrom]
		return nil
	}
	// A second, cheap pass over the kept scopes records their header fields.
	return s.scopeHeaders(r, entry)
}

// scopeHeaders records the header fields of each scope entry of r that holds items, in
// order, after r's own header fields.
func (s *Splitter) scopeHeaders(r *resRef, entry []byte) error {
	i := r.scopeFrom
	for b := entry; len(b) > 0; {
		num, typ, tn, _ := consumeTag(b)
		vn, _ := skipValue(b[tn:], typ) // both checked by scanEntry
		if num != fEntryScopes || typ != protowire.BytesType {
			b = b[tn+vn:]
			continue
		}
		p, _, _ := consumeLen(b[tn:])
		scope := b[tn+p : tn+vn]
		b = b[tn+vn:]
		from := int32(len(s.hdrs))
		hasItems := false
		for c := scope; len(c) > 0; {
			num, typ, tn, _ := consumeTag(c)
			vn, _ := skipValue(c[tn:], typ)
			if num == fScopeItems && typ == protowire.BytesType {
				hasItems = true
			} else {
				s.hdrs = append(s.hdrs, c[:tn+vn])
			}
			c = c[tn+vn:]
		}
		if !hasItems {
			s.hdrs = s.hdrs[:from]
			continue
		}
		s.scopes[i].hdrFrom, s.scopes[i].hdrTo = from, int32(len(s.hdrs))
		i++
	}
	if i != r.scopeTo {
		panic("BUG: fastpath: split found another number of scope entries on the second pass")
	}
	return nil
}

// itemKey returns the trace id of a span or log record, or nil when it has none (absent,
// empty, or all zero: the OTLP spelling of "no trace").
//
// A span's trace_id is field 1 and every SDK writes it first: when the span starts with it, it
// is taken without walking the rest. A span that repeats the field later (which a decoder
// would read as the last value) may then go by its first value: it is still delivered, only
// perhaps to another gateway than its trace.
func itemKey(item []byte, keyField protowire.Number) ([]byte, error) {
	if keyField == fSpanTraceID && len(item) > 1 && item[0] == byte(fSpanTraceID<<3|protowire.BytesType) && item[1] < 0x80 && int(item[1]) <= len(item)-2 {
		return nonZero(item[2 : 2+int(item[1])]), nil
	}
	var key []byte
	for b := item; len(b) > 0; {
		num, typ, tn, err := consumeTag(b)
		if err != nil {
			return nil, err
		}
		vn, err := skipValue(b[tn:], typ)
		if err != nil {
			return nil, err
		}
		if num == keyField && typ == protowire.BytesType {
			p, _, _ := consumeLen(b[tn:])
			key = b[tn+p : tn+vn] // the last one wins, as in a decoder
		}
		b = b[tn+vn:]
	}
	return nonZero(key), nil
}

// nonZero returns key, or nil when it is empty or all zero.
func nonZero(key []byte) []byte {
	for _, c := range key {
		if c != 0 {
			return key
		}
	}
	return nil
}

// ResourceKey is the hash Split gives entry, the body of a resource entry, under key
// (SplitResource: its attributes' bytes; SplitService: its service.name), so that another
// partitioner of resource entries agrees with a balanced destination's. Safe for concurrent
// use.
func ResourceKey(entry []byte, key SplitKey) (uint64, error) { return resourceKey(entry, key) }

// resourceKey hashes the resource of a resource entry: for SplitService the value of its
// service.name attribute, otherwise its attributes, field by field in the order they come.
func resourceKey(entry []byte, key SplitKey) (uint64, error) {
	h := uint64(hashSeed)
	for b := entry; len(b) > 0; {
		num, typ, tn, err := consumeTag(b)
		if err != nil {
			return 0, err
		}
		vn, err := skipValue(b[tn:], typ)
		if err != nil {
			return 0, err
		}
		if num != fEntryResource || typ != protowire.BytesType {
			b = b[tn+vn:]
			continue
		}
		p, _, _ := consumeLen(b[tn:])
		h = uint64(hashSeed) // the last resource field wins, as in a decoder
		for a := b[tn+p : tn+vn]; len(a) > 0; {
			num, typ, an, err := consumeTag(a)
			if err != nil {
				return 0, err
			}
			avn, err := skipValue(a[an:], typ)
			if err != nil {
				return 0, err
			}
			if num == fResourceAttrs && typ == protowire.BytesType {
				if key == SplitService {
					ap, _, _ := consumeLen(a[an:])
					if v, ok, err := serviceValue(a[an+ap : an+avn]); err != nil {
						return 0, err
					} else if ok {
						h = hashBytes(hashSeed, v)
					}
				} else {
					h = hashBytes(h, a[:an+avn])
				}
			}
			a = a[an+avn:]
		}
		b = b[tn+vn:]
	}
	return h, nil
}

// serviceValue returns the encoded AnyValue of a KeyValue whose key is service.name.
func serviceValue(kv []byte) ([]byte, bool, error) {
	var key, val []byte
	for b := kv; len(b) > 0; {
		num, typ, tn, err := consumeTag(b)
		if err != nil {
			return nil, false, err
		}
		vn, err := skipValue(b[tn:], typ)
		if err != nil {
			return nil, false, err
		}
		if typ == protowire.BytesType && (num == fKVKey || num == fKVValue) {
			p, _, _ := consumeLen(b[tn:])
			if num == fKVKey {
				key = b[tn+p : tn+vn]
			} else {
				val = b[tn+p : tn+vn]
			}
		}
		b = b[tn+vn:]
	}
	return val, bytes.Equal(key, serviceName), nil
}

// build writes each part's payload from the recorded entries.
func (s *Splitter) build() {
	n := s.n
	if cap(s.parts) < n {
		s.parts = make([]*pool.Payload, n)
		s.counts = make([]int, n)
	}
	s.parts, s.counts = s.parts[:n], s.counts[:n]
	for p := range n {
		size, items := 0, 0
		for i := range s.res {
			r := &s.res[i]
			if r.owner >= 0 {
				if int(r.owner) == p {
					size += len(r.raw)
					items += int(r.items)
				}
				continue
			}
			body, k := s.entrySize(r, int32(p))
			if k > 0 {
				size += fieldSize(body)
				items += k
			}
		}
		s.counts[p] = items
		if size == 0 {
			s.parts[p] = nil
			continue
		}
		pl := pool.NewPayload(size)
		buf := pl.Buf()
		out := *buf
		for i := range s.res {
			r := &s.res[i]
			if r.owner >= 0 {
				if int(r.owner) == p {
					out = append(out, r.raw...)
				}
				continue
			}
			if body, k := s.entrySize(r, int32(p)); k > 0 {
				out = s.appendEntry(out, r, int32(p), body)
			}
		}
		if len(out) != size {
			panic("BUG: fastpath: split part size differs from its estimate")
		}
		*buf = out
		s.parts[p] = pl
	}
}

// fieldSize is the size of a length-delimited field numbered below 16 holding body bytes.
func fieldSize(body int) int { return 1 + protowire.SizeVarint(uint64(body)) + body }

// scopeSize returns the body size of scope entry sc's share for part p and its items.
func (s *Splitter) scopeSize(sc *scopeRef, p int32) (int, int) {
	body, k := 0, 0
	for _, it := range s.items[sc.itemFrom:sc.itemTo] {
		if it.owner == p {
			body += len(it.raw)
			k++
		}
	}
	if k == 0 {
		return 0, 0
	}
	for _, h := range s.hdrs[sc.hdrFrom:sc.hdrTo] {
		body += len(h)
	}
	return body, k
}

// entrySize returns the body size of resource entry r's share for part p and its items.
func (s *Splitter) entrySize(r *resRef, p int32) (int, int) {
	body, k := 0, 0
	for i := r.scopeFrom; i < r.scopeTo; i++ {
		if sb, sk := s.scopeSize(&s.scopes[i], p); sk > 0 {
			body += fieldSize(sb)
			k += sk
		}
	}
	if k == 0 {
		return 0, 0
	}
	for _, h := range s.hdrs[r.hdrFrom:r.hdrTo] {
		body += len(h)
	}
	return body, k
}

func (s *Splitter) appendEntry(out []byte, r *resRef, p int32, body int) []byte {
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(body))
	for _, h := range s.hdrs[r.hdrFrom:r.hdrTo] {
		out = append(out, h...)
	}
	for i := r.scopeFrom; i < r.scopeTo; i++ {
		sc := &s.scopes[i]
		sb, sk := s.scopeSize(sc, p)
		if sk == 0 {
			continue
		}
		out = protowire.AppendTag(out, fEntryScopes, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(sb))
		for _, h := range s.hdrs[sc.hdrFrom:sc.hdrTo] {
			out = append(out, h...)
		}
		for _, it := range s.items[sc.itemFrom:sc.itemTo] {
			if it.owner == p {
				out = append(out, it.raw...)
			}
		}
	}
	return out
}
