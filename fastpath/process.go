package fastpath

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/pool"
)

// Processor runs byte-level steps on each resource entry of a request after the intake's scan
// and before the request joins a batch (or the spool): resource attribute edits, drops by
// resource attribute, trace sampling. process.Chain implements it; fastpath does not import
// process/, which is why the signal travels as an int (a Signal's value) and the tally as an
// unnamed array type.
type Processor interface {
	// AppendEntry appends to dst the resource entry whose value (the bytes after its tag and
	// length) is entry, once the steps ran on it, as a whole v1 entry (tag 1, length, value),
	// or appends nothing when the steps remove it. The tally says what the steps did: its
	// slot 0 is the number of items (spans, data points, log records) the result holds fewer
	// than entry, the other slots are the processor's own. An error refuses the whole request.
	// dst has at least len(entry)+Slack(sig, len(entry))+MaxEntryHeader bytes of spare
	// capacity, so that an implementation that stays within it does not allocate. Safe for concurrent use; entry
	// is only read during the call.
	AppendEntry(dst []byte, sig int, entry []byte) (out []byte, tally Tally, err error)
	// Commit counts the summed tallies of one request's entries, once the request was
	// admitted or answered without admitting anything: a request refused for want of room and
	// sent again is counted once. Safe for concurrent use.
	Commit(sig int, tally Tally)
	// Slack is the most bytes the steps may add to an entry of n bytes of signal sig (a
	// sampler that writes each kept span's trace_state adds in proportion to the entry).
	Slack(sig, n int) int
}

// Tally is what a Processor did to a request: slot 0 the items removed, the rest its own.
// An alias of an unnamed type, so that process/ can name the same type without importing
// fastpath.
type Tally = [8]int64

// MaxEntryHeader is the room an entry's tag and length prefix take at most.
const MaxEntryHeader = 1 + binary.MaxVarintLen64

// processEntries runs the Processor on every entry of req (in layout) into a pooled buffer, which it
// returns holding the v1 body that is admitted instead of req, with its item count: items less
// what the steps removed. Fields that are not entries are stripped and counted, as
// AppendEntries does, and reported for admission to count, with the summed tally for Commit. The caller returns the buffer
// with pool.PutBytes. On error it returns nil.
func processEntries(proc Processor, sig Signal, req []byte, items int, layout Layout) (*[]byte, int, Stripped, Tally, error) {
	var st Stripped
	var sum Tally
	if layout >= numLayouts {
		return nil, 0, st, sum, ErrLayout
	}
	buf := pool.GetBytes(len(req) + proc.Slack(int(sig), len(req)) + MaxEntryHeader)
	out := (*buf)[:0]
	it := NewTopLevel(req)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		switch {
		case layout == LayoutV1 && f.Num == 1, layout == LayoutOTEP && f.Num == 2:
			if f.Type != protowire.BytesType {
				*buf = out
				pool.PutBytes(buf)
				return nil, 0, Stripped{}, sum, ErrWireType
			}
			entry := req[f.Value:f.End]
			if need := len(out) + len(entry) + proc.Slack(int(sig), len(entry)) + MaxEntryHeader; need > cap(out) {
				*buf = out
				grow(buf, need, 2*need)
				out = *buf
			}
			var t Tally
			var err error
			if out, t, err = proc.AppendEntry(out, int(sig), entry); err != nil {
				*buf = out[:0]
				pool.PutBytes(buf)
				return nil, 0, Stripped{}, sum, err
			}
			for i := range sum {
				sum[i] += t[i]
			}
		case layout == LayoutOTEP && f.Num == 1:
			if f.Type != protowire.VarintType {
				*buf = out
				pool.PutBytes(buf)
				return nil, 0, Stripped{}, sum, ErrWireType
			}
		default:
			st.Fields++
			st.Bytes += f.End - f.Tag
		}
	}
	*buf = out
	if err := it.Err(); err != nil {
		pool.PutBytes(buf)
		return nil, 0, Stripped{}, sum, err
	}
	return buf, max(items-int(sum[0]), 0), st, sum, nil
}
