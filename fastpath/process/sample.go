package process

import (
	"encoding/binary"
	"math"
	"strconv"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
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
	tracestateOmitted = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_process_tracestate_values_omitted_total",
		Help: "Tracestate list members and ot sub-keys that sampling in -sample.mode proportional or equalizing left out of kept spans to make room for their threshold within the W3C and OpenTelemetry limits (1024 bytes, 31 members, 256 bytes of ot value).",
	})
	sampledOutLogs = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_process_sampled_out_log_records_total",
		Help: "Log records left out by sampling by their trace id (-sample.logs): counted here, not delivered.",
	})
	sampledKeptLogs = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_process_sampled_kept_log_records_total",
		Help: "Log records sampling by trace id (-sample.logs) kept, those without a trace id included.",
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

// sampler decides per span and per log record. Immutable once built.
type sampler struct {
	mode SampleMode
	logs bool // -sample.logs

	// hash_seed
	scaled uint32 // spans whose bucket is below it are kept
	seeded uint32 // FNV-1a state after the seed's four bytes

	// proportional and equalizing
	never     bool    // 0%: only what sampling.priority keeps is kept
	ratio     float64 // the sampling probability, at least 2^-56
	precision int     // significant hex digits of the thresholds written
	base      uint64  // the threshold of a span that arrives without one
}

func newSampler(c SampleConfig) *sampler {
	pct := min(c.Percent, 100)
	s := &sampler{mode: c.Mode, logs: c.Logs, scaled: uint32(pct * float32(hashBuckets/100.0))}
	var seed [4]byte
	binary.LittleEndian.PutUint32(seed[:], c.HashSeed)
	s.seeded = fnv1a(fnvOffset, seed[:])
	s.precision = c.Precision
	if s.precision == 0 {
		s.precision = DefaultSamplePrecision
	}
	if pct == 0 {
		s.never, s.base = true, neverThreshold
		return s
	}
	// The Collector divides in float64 after widening the float32 percentage, and raises a
	// probability too small for 56 bits to the smallest (Validate refuses one anyway).
	s.ratio = max(float64(pct)/100, minProbability)
	th, ok := thresholdFor(s.ratio, s.precision)
	if !ok {
		th = neverThreshold
	}
	s.base = th
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

// spanView is what sampling reads of a span.
type spanView struct {
	tid, ts []byte   // trace_id and trace_state (the last of each, as a decoder keeps them)
	tsSize  int      // the encoded size of every trace_state field of the span, which a rewrite replaces
	tsCount int      // trace_state fields
	tsAt    int      // where the first trace_state field starts; without one, where the first field numbered above 3 does (or the end)
	prio    priority // what sampling.priority asks for
}

// readSpan reads the fields sampling needs: the trace id, the trace_state and the attribute
// keys; every other field is skipped without a look.
func readSpan(span []byte, v *spanView) error {
	*v = spanView{tsAt: len(span)}
	prioSeen, above3 := false, false
	// A span is walked for three of its fields on every request sampled, so the walk is
	// written out here rather than through next: one-byte tags and lengths are read inline.
	for off := 0; off < len(span); {
		c := span[off]
		if c < 1<<3 || c >= 0x80 {
			// A long tag (field 16 and above), or a malformed one: the general reader.
			f, err := next(span, off)
			if err != nil {
				return err
			}
			if !above3 && f.num > 3 && v.tsCount == 0 {
				above3, v.tsAt = true, off
			}
			off = f.end
			continue
		}
		num, typ := protowire.Number(c>>3), protowire.Type(c&7)
		start := off
		if !above3 && num > 3 && v.tsCount == 0 {
			above3, v.tsAt = true, off
		}
		off++
		switch typ {
		case protowire.BytesType:
			l := 0
			if off < len(span) && span[off] < 0x80 {
				l = int(span[off])
				off++
			} else {
				n, k := protowire.ConsumeVarint(span[off:])
				if k < 0 || n > uint64(len(span)-off-k) {
					return errMalformed
				}
				l, off = int(n), off+k
			}
			if l > len(span)-off {
				return errMalformed
			}
			val := span[off : off+l]
			off += l
			switch num {
			case 1: // trace_id
				v.tid = val
			case 3: // trace_state
				if v.tsCount == 0 {
					v.tsAt = start
				}
				v.ts = val
				v.tsSize += off - start
				v.tsCount++
			case 9: // attributes
				if prioSeen {
					continue // the first sampling.priority is the one a map lookup finds
				}
				key, value, err := keyValue(val)
				if err != nil {
					return err
				}
				if string(key) == priorityKey {
					prioSeen = true
					if v.prio, err = parsePriority(value); err != nil {
						return err
					}
				}
			}
			continue
		case protowire.VarintType:
			for off < len(span) && span[off] >= 0x80 {
				off++
			}
			if off++; off > len(span) {
				return errMalformed
			}
		case protowire.Fixed64Type:
			if off += 8; off > len(span) {
				return errMalformed
			}
		case protowire.Fixed32Type:
			if off += 4; off > len(span) {
				return errMalformed
			}
		default:
			return errMalformed
		}
		if num == 1 || num == 3 || num == 9 {
			return errMalformed // a known field with the wrong wire type
		}
	}
	return nil
}

// keep is the hash_seed decision of one span.
func (s *sampler) keep(span []byte) (bool, error) {
	var v spanView
	if err := readSpan(span, &v); err != nil {
		return false, err
	}
	return s.hashSeedKeeps(&v), nil
}

// hashSeedKeeps decides as the Collector does in hash_seed mode with fail_closed:
// sampling.priority 0 drops and above 0 keeps whatever else holds; otherwise a span without a
// trace id, with a trace_state that mode refuses (tracestateBlocks), or at 0% is dropped, and
// the rest is kept when its trace id's bucket is below the scaled percentage.
func (s *sampler) hashSeedKeeps(v *spanView) bool {
	switch {
	case v.prio == mustKeep:
		return true
	case v.prio == mustDrop, s.scaled == 0, len(v.tid) != 16, allZero(v.tid), len(v.ts) > 0 && tracestateBlocks(v.ts):
		return false
	}
	return s.bucket(v.tid) < s.scaled
}

// consistentDecision is the decision of the proportional and equalizing modes for one span.
type consistentDecision struct {
	keep bool
	// What the kept span's th becomes: th, or, with keepTH, the th it arrived with (a
	// stricter threshold than this sampler's is never lowered).
	th     uint64
	keepTH bool
	// rewrite is false when the span's trace_state does not parse: a kept span leaves with it
	// as it came.
	rewrite bool
}

// decideConsistent decides one span as the Collector's proportional or equalizing mode does
// with fail_closed, given its trace_state parsed into st:
//
//  1. The randomness is the rv of the tracestate, else the trace id's last 56 bits. A span
//     without either, or whose tracestate does not parse, fails: it is held to the never
//     threshold. So is one whose th exceeds its randomness (it should not have been kept
//     upstream), and that th is forgotten.
//  2. Otherwise the threshold is, in proportional mode, the incoming sampling probability
//     (1 without a th) times this sampler's, rounded to -sample.precision digits (never,
//     below 2^-56); in equalizing mode this sampler's, or the incoming th when stricter. At
//     0% it is never.
//  3. sampling.priority 0 makes it never, above 0 zero (keep).
//  4. The span is kept when its randomness is at least the threshold, and leaves with th set
//     to the threshold, unless it came with a stricter one, which stays.
func (s *sampler) decideConsistent(v *spanView, st *traceState) consistentDecision {
	var d consistentDecision
	parsed := parseTraceState(v.ts, st)
	rnd, th := uint64(maxRandomness), uint64(neverThreshold)
	switch {
	case !parsed:
	case s.never:
		// The Collector's 0% sampler keeps nothing the priority does not, and checks no
		// randomness.
	case st.rv != nil:
		rnd, th = st.rnd, 0
	case len(v.tid) == 16 && !allZero(v.tid):
		rnd, th = traceRandomness(v.tid), 0
	}
	if parsed && st.th != nil && st.thr > rnd {
		st.th = nil // inconsistent: dropped unless the priority keeps it, without this th
		th = neverThreshold
	}
	if th == 0 {
		switch s.mode {
		case SampleProportional:
			th = s.base
			if st.th != nil {
				p := thresholdProbability(st.thr) * s.ratio
				var ok bool
				if th, ok = thresholdFor(p, s.precision); !ok {
					th = neverThreshold
				}
			}
		default: // SampleEqualizing
			th = s.base
			if st.th != nil && st.thr > th {
				th = st.thr
			}
		}
	}
	switch v.prio {
	case mustDrop:
		th = neverThreshold
	case mustKeep:
		th = 0
	}
	if th > rnd {
		return d
	}
	d.keep, d.rewrite, d.th = true, parsed, th
	d.keepTH = st.th != nil && st.thr > th
	return d
}

// keepLog decides a log record by its trace id: as a span of the same trace that arrives
// without a tracestate or sampling.priority is decided. A record without a trace id is kept.
func (s *sampler) keepLog(rec []byte) (bool, error) {
	var tid []byte
	for off := 0; off < len(rec); {
		f, err := next(rec, off)
		if err != nil {
			return false, err
		}
		off = f.end
		if f.num == 9 { // trace_id
			if f.typ != protowire.BytesType {
				return false, errMalformed
			}
			tid = rec[f.val:f.end]
		}
	}
	if len(tid) != 16 || allZero(tid) {
		return true, nil
	}
	if s.mode == SampleHashSeed {
		return s.bucket(tid) < s.scaled, nil
	}
	return s.base <= traceRandomness(tid), nil
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

func commitSampled(sig fastpath.Signal, t *Tally) {
	out, kept := sampledOutSpans, sampledKeptSpans
	if sig == fastpath.Logs {
		out, kept = sampledOutLogs, sampledKeptLogs
	}
	if t[tSampledOut] > 0 {
		out.Add(float64(t[tSampledOut]))
	}
	if t[tSampledKept] > 0 {
		kept.Add(float64(t[tSampledKept]))
	}
	if t[tTracestateOmitted] > 0 {
		tracestateOmitted.Add(float64(t[tTracestateOmitted]))
	}
}
