package process

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// Sampling plans an entry before it writes it, since lengths come before the bytes they
// measure: a decision per item (span or log record), the new length of each scope, and, for a
// span kept with a new trace_state, the span's new length and that trace_state.

// Decisions, one byte per item of an entry, in order.
const (
	itemDropped   = 0
	itemKept      = 1 // as it came
	itemRewritten = 2 // with the trace_state the plan holds for it
)

// spanPlan holds one entry's plan between planning and writing. All three buffers come from
// the pool; tracestates only in the modes that write them.
type spanPlan struct {
	// dec holds a decision per item.
	dec *[]byte
	// scopes holds, per scope (ScopeSpans, ScopeLogs), its new payload length (4 bytes,
	// little endian), or removedScope when none of its items is kept.
	scopes *[]byte
	// tracestates holds, per rewritten span in order, its new payload length (4 bytes, little
	// endian), the length of its new trace_state (2 bytes, little endian; at most
	// maxTracestate), where in the span it goes (4 bytes) and how
	// many bytes there it replaces (2 bytes; cutWalk when the span has several trace_state
	// fields to leave out), then the trace_state.
	tracestates *[]byte
}

const removedScope = math.MaxUint32

// rewriteHeader is the size of the lengths before a rewritten span's trace_state in the plan.
const rewriteHeader = 12

// cutWalk: the span has several trace_state fields, which appendSpan finds by walking it.
const cutWalk = math.MaxUint16

func appendPooled(buf *[]byte, b ...byte) {
	pool.Reserve(buf, len(b))
	*buf = append(*buf, b...)
}

// tracestateRoom is the most a tracestate written for a kept span takes: appendTraceState
// keeps it within the limit it is read with.
const tracestateRoom = maxTracestate

// planned is what planning an entry found.
type planned struct {
	total, kept int // items, and items kept
	delta       int // how much the entry's payload changes by
	scopes      int // scopes that keep an item
	rewritten   int // spans kept with a new trace_state
	omitted     int // values left out of those trace_states to make room (appendTraceState)
}

// planItems decides every item of the entry e of signal sig (ResourceSpans or ResourceLogs:
// both hold their scopes at field 2 and their scopes hold their items at field 2).
func (s *sampler) planItems(sp *spanPlan, sig fastpath.Signal, e []byte) (pn planned, err error) {
	for off := 0; off < len(e); {
		f, err := next(e, off)
		if err != nil {
			return pn, err
		}
		off = f.end
		if f.num != 2 {
			continue
		}
		if f.typ != protowire.BytesType {
			return pn, errMalformed
		}
		scope := e[f.val:f.end]
		n, k, size := 0, 0, len(scope)
		for so := 0; so < len(scope); {
			g, err := next(scope, so)
			if err != nil {
				return pn, err
			}
			so = g.end
			if g.num != 2 {
				continue
			}
			if g.typ != protowire.BytesType {
				return pn, errMalformed
			}
			dec, grown, omitted, err := s.planItem(sp, sig, scope[g.val:g.end])
			if err != nil {
				return pn, err
			}
			n++
			pn.omitted += omitted
			switch dec {
			case itemDropped:
				size -= g.size()
			case itemKept:
				k++
			case itemRewritten:
				k++
				pn.rewritten++
				size += fieldSize(grown) - g.size()
			}
			appendPooled(sp.dec, dec)
		}
		pn.total += n
		pn.kept += k
		var b [4]byte
		if k == 0 {
			// The Collector removes a scope left without items (one that came without any
			// too), and then a resource entry left without scopes.
			binary.LittleEndian.PutUint32(b[:], removedScope)
			pn.delta -= f.size()
		} else {
			binary.LittleEndian.PutUint32(b[:], uint32(size))
			pn.delta += fieldSize(size) - f.size()
			pn.scopes++
		}
		appendPooled(sp.scopes, b[:]...)
	}
	return pn, nil
}

// planItem decides one item; for a span kept with a new trace_state it records the span's new
// payload length, which it also returns, and the trace_state, and returns how many values
// were left out of it to make room.
func (s *sampler) planItem(sp *spanPlan, sig fastpath.Signal, item []byte) (dec byte, size, omitted int, err error) {
	if sig == fastpath.Logs {
		keep, err := s.keepLog(item)
		if keep {
			return itemKept, 0, 0, err
		}
		return itemDropped, 0, 0, err
	}
	var v spanView
	if err := readSpan(item, &v); err != nil {
		return itemDropped, 0, 0, err
	}
	if s.mode == SampleHashSeed {
		if s.hashSeedKeeps(&v) {
			return itemKept, 0, 0, nil
		}
		return itemDropped, 0, 0, nil
	}
	var st traceState
	d := s.decideConsistent(&v, &st)
	switch {
	case !d.keep:
		return itemDropped, 0, 0, nil
	case !d.rewrite:
		return itemKept, 0, 0, nil
	}
	// The new trace_state is written into the plan after room for the two lengths; when it
	// is the one the span carries (an equal threshold, already laid out as the Collector lays
	// it out), it is taken back and the span stays as it came.
	var tv [hexDigits]byte
	tvalue := appendTValue(tv[:0], d.th)
	if d.keepTH {
		tvalue = st.th
	}
	buf := sp.tracestates
	pool.Reserve(buf, rewriteHeader+tracestateRoom)
	at := len(*buf)
	out, omitted := appendTraceState((*buf)[:at+rewriteHeader], v.ts, &st, tvalue)
	nts := out[at+rewriteHeader:]
	if string(nts) == string(v.ts) && v.tsSize == fieldSize(len(v.ts)) {
		*buf = out[:at]
		return itemKept, 0, 0, nil
	}
	size = len(item) - v.tsSize + fieldSize(len(nts))
	cut := v.tsSize // one trace_state field at tsAt, or none (0)
	if v.tsCount > 1 {
		cut = cutWalk
	}
	binary.LittleEndian.PutUint32(out[at:], uint32(size))
	binary.LittleEndian.PutUint16(out[at+4:], uint16(len(nts)))
	binary.LittleEndian.PutUint32(out[at+6:], uint32(v.tsAt))
	binary.LittleEndian.PutUint16(out[at+10:], uint16(cut))
	*buf = out
	return itemRewritten, size, omitted, nil
}

// appendScope writes the scope field f of e with the items sp keeps, starting at item decision
// di and rewritten span ri (an offset into sp.tracestates); it returns the next ones.
func appendScope(dst []byte, e []byte, f field, size int, sp *spanPlan, di, ri int) ([]byte, int, int) {
	dst = appendHeader(dst, 2, size)
	scope := e[f.val:f.end]
	run := 0
	for so := 0; so < len(scope); {
		g, _ := next(scope, so) // planItems read these bytes already
		so = g.end
		if g.num != 2 {
			continue
		}
		switch (*sp.dec)[di] {
		case itemDropped:
			dst = append(dst, scope[run:g.tag]...)
			run = g.end
		case itemRewritten:
			dst = append(dst, scope[run:g.tag]...)
			p := (*sp.tracestates)[ri:]
			size := int(binary.LittleEndian.Uint32(p))
			n := int(binary.LittleEndian.Uint16(p[4:]))
			at := int(binary.LittleEndian.Uint32(p[6:]))
			cut := int(binary.LittleEndian.Uint16(p[10:]))
			ts := p[rewriteHeader : rewriteHeader+n]
			span := scope[g.val:g.end]
			if cut == cutWalk {
				dst = appendSpan(dst, span, size, ts)
			} else {
				// The trace_state goes where the span's was, or where an encoder puts it.
				dst = appendHeader(dst, 2, size)
				dst = append(dst, span[:at]...)
				dst = append(appendHeader(dst, 3, len(ts)), ts...)
				dst = append(dst, span[at+cut:]...)
			}
			ri += rewriteHeader + n
			run = g.end
		}
		di++
	}
	return append(dst, scope[run:]...), di, ri
}

// appendSpan writes span, which has several trace_state fields, as a field 2 of size bytes
// with ts as its only trace_state, in the place of the first.
func appendSpan(dst, span []byte, size int, ts []byte) []byte {
	dst = appendHeader(dst, 2, size)
	run, written := 0, false
	for off := 0; off < len(span); {
		f, _ := next(span, off) // readSpan read these bytes already
		off = f.end
		if f.num != 3 {
			continue
		}
		dst = append(dst, span[run:f.tag]...)
		if !written {
			dst = append(appendHeader(dst, 3, len(ts)), ts...)
			written = true
		}
		run = f.end
	}
	return append(dst, span[run:]...)
}
