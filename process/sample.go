package process

import (
	"encoding/binary"
	"math"
	"strconv"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/pool"
)

var (
	sampledOutSpans = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_process_sampled_out_spans_total",
		Help: "Spans left out by trace sampling (-sample.traces): counted here, not delivered.",
	})
	sampledKeptSpans = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_process_sampled_kept_spans_total",
		Help: "Spans trace sampling (-sample.traces) kept.",
	})
)

// The Collector-contrib probabilistic_sampler's hash_seed mode hashes the 4-byte little-endian
// seed followed by the 16-byte trace id with 32-bit FNV-1a, keeps the low 14 bits, and keeps
// the span when they fall below the percentage scaled to 2^14 buckets. The scaling is done as
// its configuration reads it: a float32 percentage multiplied in float32 precision and
// truncated, so that 33.333 keeps exactly the buckets it keeps.
const (
	hashBuckets = 1 << 14
	fnvOffset   = 2166136261
	fnvPrime    = 16777619
)

// sampler decides per span. Immutable once built.
type sampler struct {
	scaled uint32 // spans whose bucket is below it are kept
	seeded uint32 // FNV-1a state after the seed's four bytes
}

func newSampler(c SampleConfig) *sampler {
	pct := min(c.Percent, 100)
	s := &sampler{scaled: uint32(pct * float32(hashBuckets/100.0))}
	var seed [4]byte
	binary.LittleEndian.PutUint32(seed[:], c.HashSeed)
	s.seeded = fnv1a(fnvOffset, seed[:])
	return s
}

func fnv1a(h uint32, b []byte) uint32 {
	for _, c := range b {
		h ^= uint32(c)
		h *= fnvPrime
	}
	return h
}

// bucket is the trace id's hash bucket, 0 to 2^14-1.
func (s *sampler) bucket(tid []byte) uint32 { return fnv1a(s.seeded, tid) & (hashBuckets - 1) }

// priority is what the OpenTracing sampling.priority span attribute asks for.
type priority uint8

const (
	deferToHash priority = iota
	mustKeep
	mustDrop
)

const priorityKey = "sampling.priority"

// keep decides one span, as the Collector decides with fail_closed: sampling.priority 0
// drops and above 0 keeps whatever else holds; otherwise a span without a trace id, with a
// trace_state the hash_seed mode refuses (tracestateBlocks), or at 0% is dropped, and the
// rest is kept when its trace id's bucket is below the scaled percentage.
func (s *sampler) keep(span []byte) (bool, error) {
	var tid, ts []byte
	prio, prioSeen := deferToHash, false
	// A span is walked for three of its fields on every request sampled, so the walk is
	// written out here rather than through next: one-byte tags and lengths are read inline.
	for off := 0; off < len(span); {
		c := span[off]
		if c < 1<<3 || c >= 0x80 {
			// A long tag (field 16 and above), or a malformed one: the general reader.
			f, err := next(span, off)
			if err != nil {
				return false, err
			}
			off = f.end
			continue
		}
		num, typ := protowire.Number(c>>3), protowire.Type(c&7)
		off++
		switch typ {
		case protowire.BytesType:
			l := 0
			if off < len(span) && span[off] < 0x80 {
				l = int(span[off])
				off++
			} else {
				v, n := protowire.ConsumeVarint(span[off:])
				if n < 0 || v > uint64(len(span)-off-n) {
					return false, errMalformed
				}
				l, off = int(v), off+n
			}
			if l > len(span)-off {
				return false, errMalformed
			}
			val := span[off : off+l]
			off += l
			switch num {
			case 1: // trace_id
				tid = val
			case 3: // trace_state
				ts = val
			case 9: // attributes
				if prioSeen {
					continue // the first sampling.priority is the one a map lookup finds
				}
				key, v, err := keyValue(val)
				if err != nil {
					return false, err
				}
				if string(key) == priorityKey {
					prioSeen = true
					if prio, err = parsePriority(v); err != nil {
						return false, err
					}
				}
			}
			continue
		case protowire.VarintType:
			for off < len(span) && span[off] >= 0x80 {
				off++
			}
			if off++; off > len(span) {
				return false, errMalformed
			}
		case protowire.Fixed64Type:
			if off += 8; off > len(span) {
				return false, errMalformed
			}
		case protowire.Fixed32Type:
			if off += 4; off > len(span) {
				return false, errMalformed
			}
		default:
			return false, errMalformed
		}
		if num == 1 || num == 3 || num == 9 {
			return false, errMalformed // a known field with the wrong wire type
		}
	}
	switch {
	case prio == mustKeep:
		return true, nil
	case prio == mustDrop, s.scaled == 0, len(tid) != 16, allZero(tid), tracestateBlocks(ts):
		return false, nil
	}
	return s.bucket(tid) < s.scaled, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// parsePriority reads a sampling.priority AnyValue: an int or a double above 0 keeps, equal
// to 0 drops; a string is read as a float (Go's ParseFloat, as the Collector reads it); any
// other type, or a negative or NaN value, leaves the decision to the hash.
func parsePriority(v []byte) (priority, error) {
	var last field
	found := false
	for off := 0; off < len(v); {
		f, err := next(v, off)
		if err != nil {
			return deferToHash, err
		}
		off = f.end
		if f.num >= 1 && f.num <= 7 { // the members of AnyValue's oneof: the last one wins
			last, found = f, true
		}
	}
	if !found {
		return deferToHash, nil
	}
	var x float64
	switch {
	case last.num == 3 && last.typ == protowire.VarintType: // int_value
		n := int64(last.varint)
		if n == 0 {
			return mustDrop, nil
		} else if n > 0 {
			return mustKeep, nil
		}
		return deferToHash, nil
	case last.num == 4 && last.typ == protowire.Fixed64Type: // double_value
		x = math.Float64frombits(binary.LittleEndian.Uint64(v[last.val:last.end]))
	case last.num == 1 && last.typ == protowire.BytesType: // string_value
		s := v[last.val:last.end]
		var err error
		// The string is only read during the call.
		if x, err = strconv.ParseFloat(unsafe.String(unsafe.SliceData(s), len(s)), 64); err != nil {
			return deferToHash, nil
		}
	default:
		return deferToHash, nil
	}
	switch {
	case x == 0:
		return mustDrop, nil
	case x > 0:
		return mustKeep, nil
	}
	return deferToHash, nil
}

// spanPlan holds one entry's decisions between planning and writing: a byte per span of the
// entry, in order (1: kept), and per ScopeSpans the new payload length (4 bytes, little
// endian; removedScope when none of its spans is kept). Both buffers come from the pool.
type spanPlan struct {
	dec, scopes *[]byte
}

const removedScope = math.MaxUint32

func appendPooled(buf *[]byte, b ...byte) {
	if len(*buf)+len(b) > cap(*buf) {
		nb := pool.GetBytes(2*cap(*buf) + len(b))
		*nb = append(*nb, *buf...)
		*buf, *nb = *nb, (*buf)[:0]
		pool.PutBytes(nb)
	}
	*buf = append(*buf, b...)
}

// planSpans decides every span of the ResourceSpans e. delta is how much the entry's payload
// shrinks by (a negative number), scopes how many ScopeSpans keep a span.
func (s *sampler) planSpans(sp *spanPlan, e []byte) (total, kept, delta, scopes int, err error) {
	for off := 0; off < len(e); {
		f, err := next(e, off)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		off = f.end
		if f.num != 2 {
			continue
		}
		if f.typ != protowire.BytesType {
			return 0, 0, 0, 0, errMalformed
		}
		scope := e[f.val:f.end]
		n, k, size := 0, 0, len(scope)
		for so := 0; so < len(scope); {
			g, err := next(scope, so)
			if err != nil {
				return 0, 0, 0, 0, err
			}
			so = g.end
			if g.num != 2 {
				continue
			}
			if g.typ != protowire.BytesType {
				return 0, 0, 0, 0, errMalformed
			}
			keep, err := s.keep(scope[g.val:g.end])
			if err != nil {
				return 0, 0, 0, 0, err
			}
			n++
			if keep {
				k++
				appendPooled(sp.dec, 1)
			} else {
				size -= g.size()
				appendPooled(sp.dec, 0)
			}
		}
		total += n
		kept += k
		var b [4]byte
		if k == 0 {
			// The Collector removes a ScopeSpans left without spans (one that came without
			// any too), and then a ResourceSpans left without ScopeSpans.
			binary.LittleEndian.PutUint32(b[:], removedScope)
			delta -= f.size()
		} else {
			binary.LittleEndian.PutUint32(b[:], uint32(size))
			delta += fieldSize(size) - f.size()
			scopes++
		}
		appendPooled(sp.scopes, b[:]...)
	}
	return total, kept, delta, scopes, nil
}

// appendScope writes the ScopeSpans field f of e with the spans sp keeps, starting at span
// decision di; it returns the next decision's index.
func appendScope(dst []byte, e []byte, f field, size int, sp *spanPlan, di int) ([]byte, int) {
	dst = appendHeader(dst, 2, size)
	scope := e[f.val:f.end]
	run := 0
	for so := 0; so < len(scope); {
		g, _ := next(scope, so) // planSpans read these bytes already
		so = g.end
		if g.num != 2 {
			continue
		}
		if (*sp.dec)[di] == 0 {
			dst = append(dst, scope[run:g.tag]...)
			run = g.end
		}
		di++
	}
	return append(dst, scope[run:]...), di
}

func commitSampled(t *Tally) {
	if t[tSampledOut] > 0 {
		sampledOutSpans.Add(float64(t[tSampledOut]))
	}
	if t[tSampledKept] > 0 {
		sampledKeptSpans.Add(float64(t[tSampledKept]))
	}
}
