package kafkadest

import (
	"bytes"
	"encoding/hex"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// The trace_id of the items regrouped: Span.trace_id, LogRecord.trace_id.
const (
	fSpanTraceID = 1
	fLogTraceID  = 9
)

// byTrace regroups the spans (or log records) of a request by trace, without decoding them:
// each trace becomes one request holding its items under copies of their resource and scope
// headers (every field of the entry but its scope entries, of the scope entry but its items),
// the items of a trace in the order the batch had them. This is what the Collector's
// partition_traces_by_id (partition_logs_by_trace_id) sends, one message per trace keyed by
// its trace id in lower-case hex, so that a trace's items land in one partition whoever
// produced them; what differs is only where the header fields sit relative to the items,
// which protobuf does not keep. Items without a trace id make one request without a key.
//
// A byTrace is reused across batches and allocates nothing once its slices fit. Not safe for
// concurrent use.
type byTrace struct {
	idField protowire.Number // the items' trace_id field
	hdrs    []byte           // the headers of every resource and scope entry, one after another
	res     []span           // each resource entry's header in hdrs
	scope   []span           // each scope entry's header in hdrs
	items   []traceOf        // every span
	order   []int32          // items, sorted by trace id and, within a trace, by position
	out     []byte           // the requests, one per trace
	keys    []byte           // each trace's key
	reqs    []traced
}

// span is a range of a buffer.
type span struct{ from, to int32 }

// traceOf is one span and where it sits.
type traceOf struct {
	raw        []byte // the whole field
	trace      []byte // its trace_id, nil when absent or all zero
	res, scope int32
}

// traced is one trace's request in out and its key in keys (from == to: no key).
type traced struct{ req, key span }

// split regroups req, a request of sig (traces or logs); the result is in b.reqs, valid until
// the next call.
func (b *byTrace) split(sig fastpath.Signal, req []byte) error {
	b.idField = fSpanTraceID
	if sig == fastpath.Logs {
		b.idField = fLogTraceID
	}
	b.hdrs, b.res, b.scope, b.items = b.hdrs[:0], b.res[:0], b.scope[:0], b.items[:0]
	b.out, b.keys, b.reqs = b.out[:0], b.keys[:0], b.reqs[:0]
	it := fastpath.NewTopLevel(req)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fEntry || f.Type != protowire.BytesType {
			return errNotEntries
		}
		if err := b.entry(req[f.Value:f.End]); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	b.order = b.order[:0]
	for i := range b.items {
		b.order = append(b.order, int32(i))
	}
	slices.SortStableFunc(b.order, func(x, y int32) int { return bytes.Compare(b.items[x].trace, b.items[y].trace) })
	// Size every trace's request first, so that out grows once and the ranges stay put.
	total, keys := 0, 0
	for from := 0; from < len(b.order); {
		to := b.traceEnd(from)
		total += b.size(from, to)
		if b.items[b.order[from]].trace != nil {
			keys += 2 * len(b.items[b.order[from]].trace)
		}
		from = to
	}
	b.out = slices.Grow(b.out, total)
	b.keys = slices.Grow(b.keys, keys)
	for from := 0; from < len(b.order); {
		to := b.traceEnd(from)
		t := traced{req: span{from: int32(len(b.out))}, key: span{from: int32(len(b.keys))}}
		b.write(from, to)
		t.req.to = int32(len(b.out))
		if id := b.items[b.order[from]].trace; id != nil {
			b.keys = hex.AppendEncode(b.keys, id)
		}
		t.key.to = int32(len(b.keys))
		b.reqs = append(b.reqs, t)
		from = to
	}
	return nil
}

// entry records the header, the scope entries and the spans of one resource entry.
func (b *byTrace) entry(entry []byte) error {
	res := int32(len(b.res))
	h := span{from: int32(len(b.hdrs))}
	it := fastpath.NewTopLevel(entry)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fScope {
			b.hdrs = append(b.hdrs, entry[f.Tag:f.End]...)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	h.to = int32(len(b.hdrs))
	b.res = append(b.res, h)
	for it = fastpath.NewTopLevel(entry); ; {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fScope {
			continue
		}
		if f.Type != protowire.BytesType {
			return fastpath.ErrWireType
		}
		if err := b.scopeEntry(entry[f.Value:f.End], res); err != nil {
			return err
		}
	}
	return it.Err()
}

// scopeEntry records the header and the spans of one scope entry of resource entry res.
func (b *byTrace) scopeEntry(scope []byte, res int32) error {
	sc := int32(len(b.scope))
	h := span{from: int32(len(b.hdrs))}
	it := fastpath.NewTopLevel(scope)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fItem {
			b.hdrs = append(b.hdrs, scope[f.Tag:f.End]...)
			continue
		}
		if f.Type != protowire.BytesType {
			return fastpath.ErrWireType
		}
		id, err := traceID(scope[f.Value:f.End], b.idField)
		if err != nil {
			return err
		}
		b.items = append(b.items, traceOf{raw: scope[f.Tag:f.End], trace: id, res: res, scope: sc})
	}
	if err := it.Err(); err != nil {
		return err
	}
	h.to = int32(len(b.hdrs))
	b.scope = append(b.scope, h)
	return nil
}

// traceID is the trace_id (field idField) of a span or log record, nil when it has none or an
// all-zero one (the Collector's key is then empty: no key).
func traceID(s []byte, idField protowire.Number) ([]byte, error) {
	var id []byte
	it := fastpath.NewTopLevel(s)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num == idField && f.Type == protowire.BytesType {
			id = s[f.Value:f.End] // the last one counts, as for any protobuf reader
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	for _, c := range id {
		if c != 0 {
			return id, nil
		}
	}
	return nil, nil
}

// traceEnd is the end, in order, of the trace that starts at from.
func (b *byTrace) traceEnd(from int) int {
	id := b.items[b.order[from]].trace
	to := from + 1
	for to < len(b.order) && bytes.Equal(b.items[b.order[to]].trace, id) {
		to++
	}
	return to
}

// runs calls fn for each run of order[from:to] under one resource entry (resTo: its end) and,
// within it, one scope entry (scopeTo), with the sizes of their bodies.
func (b *byTrace) runs(from, to int, fn func(i, resTo, scopeTo, resBody, scopeBody int)) {
	for i := from; i < to; {
		r := b.items[b.order[i]].res
		resTo := i
		for resTo < to && b.items[b.order[resTo]].res == r {
			resTo++
		}
		resBody := int(b.res[r].to - b.res[r].from)
		for j := i; j < resTo; {
			scopeTo, body := b.scopeRun(j, resTo)
			resBody += fieldLen(body)
			j = scopeTo
		}
		for j := i; j < resTo; {
			scopeTo, body := b.scopeRun(j, resTo)
			fn(j, resTo, scopeTo, resBody, body)
			j = scopeTo
		}
		i = resTo
	}
}

// scopeRun is the end of the run of order[from:to] in the scope entry of order[from], and the
// size of that run's scope entry body.
func (b *byTrace) scopeRun(from, to int) (int, int) {
	sc := b.items[b.order[from]].scope
	body := int(b.scope[sc].to - b.scope[sc].from)
	i := from
	for ; i < to && b.items[b.order[i]].scope == sc; i++ {
		body += len(b.items[b.order[i]].raw)
	}
	return i, body
}

// size is the size of the request of order[from:to].
func (b *byTrace) size(from, to int) int {
	n := 0
	b.runs(from, to, func(i, resTo, scopeTo, resBody, _ int) {
		if i == from || b.items[b.order[i-1]].res != b.items[b.order[i]].res {
			n += fieldLen(resBody)
		}
	})
	return n
}

// write appends the request of order[from:to] to out.
func (b *byTrace) write(from, to int) {
	b.runs(from, to, func(i, _, scopeTo, resBody, scopeBody int) {
		it := &b.items[b.order[i]]
		if i == from || b.items[b.order[i-1]].res != it.res {
			b.out = protowire.AppendTag(b.out, fEntry, protowire.BytesType)
			b.out = protowire.AppendVarint(b.out, uint64(resBody))
			b.out = append(b.out, b.hdrs[b.res[it.res].from:b.res[it.res].to]...)
		}
		b.out = protowire.AppendTag(b.out, fScope, protowire.BytesType)
		b.out = protowire.AppendVarint(b.out, uint64(scopeBody))
		b.out = append(b.out, b.hdrs[b.scope[it.scope].from:b.scope[it.scope].to]...)
		for j := i; j < scopeTo; j++ {
			b.out = append(b.out, b.items[b.order[j]].raw...)
		}
	})
}
