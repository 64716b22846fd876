package fastpath

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/pool"
)

// Processor runs byte-level steps on each resource entry of a request after the intake's scan
// and before the request joins a batch (or the spool): resource attribute edits, drops by
// resource attribute, trace sampling. process.Chain implements it; fastpath does not import
// process/, which is why the signal travels as an int (a Signal's value).
type Processor interface {
	// AppendEntry appends to dst the resource entry whose value (the bytes after its tag and
	// length) is entry, once the steps ran on it, as a whole v1 entry (tag 1, length, value),
	// or appends nothing when the steps remove it. removed is the number of items (spans, data
	// points, log records) the result holds fewer than entry. An error refuses the whole
	// request. dst has at least len(entry)+Slack()+MaxEntryHeader bytes of spare capacity, so
	// that an implementation that stays within it does not allocate. Safe for concurrent use;
	// entry is only read during the call.
	AppendEntry(dst []byte, sig int, entry []byte) (out []byte, removed int, err error)
	// Slack is the most bytes a step may add to one entry.
	Slack() int
}

// MaxEntryHeader is the room an entry's tag and length prefix take at most.
const MaxEntryHeader = 1 + binary.MaxVarintLen64

// process runs the Processor on every entry of req (in layout) into a pooled buffer, which it
// returns holding the v1 body that is admitted instead of req, with its item count: items less
// what the steps removed. Fields that are not entries are stripped and counted, as
// AppendEntries does, and reported for admission to count. The caller returns the buffer
// with pool.PutBytes. On error it returns nil.
func (p *Pipeline) process(sig Signal, req []byte, items int, layout Layout) (*[]byte, int, Stripped, error) {
	var st Stripped
	if layout >= numLayouts {
		return nil, 0, st, ErrLayout
	}
	proc := p.cfg.Processor
	slack := proc.Slack() + MaxEntryHeader
	buf := pool.GetBytes(len(req) + slack)
	out := (*buf)[:0]
	removed := 0
	it := NewTopLevel(req)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		switch {
		case layout == LayoutV1 && f.Num == 1, layout == LayoutOTEP && f.Num == 2:
			if f.Type != protowire.BytesType {
				*buf = out
				pool.PutBytes(buf)
				return nil, 0, Stripped{}, ErrWireType
			}
			entry := req[f.Value:f.End]
			if need := len(out) + len(entry) + slack; need > cap(out) {
				*buf = out
				grow(buf, need, 2*need)
				out = *buf
			}
			var n int
			var err error
			if out, n, err = proc.AppendEntry(out, int(sig), entry); err != nil {
				*buf = out[:0]
				pool.PutBytes(buf)
				return nil, 0, Stripped{}, err
			}
			removed += n
		case layout == LayoutOTEP && f.Num == 1:
			if f.Type != protowire.VarintType {
				*buf = out
				pool.PutBytes(buf)
				return nil, 0, Stripped{}, ErrWireType
			}
		default:
			st.Fields++
			st.Bytes += f.End - f.Tag
		}
	}
	*buf = out
	if err := it.Err(); err != nil {
		pool.PutBytes(buf)
		return nil, 0, Stripped{}, err
	}
	return buf, max(items-removed, 0), st, nil
}
