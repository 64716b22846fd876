package kafkadest

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Fields of an export request that the cut reads; the same numbers in every signal:
// Export*ServiceRequest.resource_{spans,metrics,logs} = 1, Resource*.scope_* = 2,
// Scope*.{spans,metrics,log_records} = 2.
const (
	fEntry = 1
	fScope = 2
	fItem  = 2
)

// errNotEntries is a payload whose top level holds anything but resource entries: a batch
// never does (intake strips every other field), so it is dropped as invalid.
var errNotEntries = errors.New("kafkadest: a batch holds a top-level field that is not a resource entry")

// piece is one record's value: payload[from:to] of the source it was cut from, or, when
// inBuf, of the cutter's buffer (where pieces of entries cut below the resource level are
// written; resolved once the cut is over, when the buffer no longer moves).
type piece struct {
	src      []byte
	from, to int
	inBuf    bool
	key      int // index of the record's key in the send's keys, -1: none
}

// cutter cuts OTLP requests into pieces of at most limit bytes, each itself a valid request of
// the same signal, without decoding: runs of whole resource entries, kept in place; an entry
// larger than limit cut between its scope entries, each piece repeating the entry's other
// fields (the resource, the schema URL); a scope entry larger than limit cut between its items
// (spans, metrics, log records) the same way. An item that is larger than limit on its own,
// with its headers, cannot be sent: it is left out and counted in tooLarge.
//
// A cutter is reused across batches: its slices keep their capacity, so that cutting
// allocates nothing once they fit the batches seen. Not safe for concurrent use.
type cutter struct {
	limit    int
	pieces   []piece
	buf      []byte // the pieces built below the resource level
	tooLarge int    // items left out because they are larger than limit alone
	cutItems int    // resource entries cut below the resource level
	sig      fastpath.Signal
	resHdr   []byte // the fields of the entry being cut, other than its scope entries
	scopeHdr []byte // the fields of the scope entry being cut, other than its items
}

// reset readies c for a batch of sig, with records of at most limit bytes.
func (c *cutter) reset(sig fastpath.Signal, limit int) {
	c.limit, c.sig = limit, sig
	c.pieces, c.buf = c.pieces[:0], c.buf[:0]
	c.tooLarge, c.cutItems = 0, 0
}

// cut adds the pieces of req, a request (concatenated resource entries), each with key.
func (c *cutter) cut(req []byte, key int) error {
	runFrom, runTo := -1, -1
	flush := func() {
		if runFrom >= 0 {
			c.pieces = append(c.pieces, piece{src: req, from: runFrom, to: runTo, key: key})
			runFrom, runTo = -1, -1
		}
	}
	it := fastpath.NewTopLevel(req)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fEntry || f.Type != protowire.BytesType {
			return errNotEntries
		}
		if f.End-f.Tag > c.limit {
			flush()
			if err := c.cutEntry(req[f.Value:f.End], key); err != nil {
				return err
			}
			continue
		}
		if runFrom >= 0 && f.End-runFrom > c.limit {
			flush()
		}
		if runFrom < 0 {
			runFrom = f.Tag
		}
		runTo = f.End
	}
	if err := it.Err(); err != nil {
		return err
	}
	flush()
	return nil
}

// fieldLen is the size of a length-delimited field of a number below 16 holding n bytes.
func fieldLen(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// cutEntry cuts one resource entry (its body) that is larger than limit between its scope
// entries.
func (c *cutter) cutEntry(entry []byte, key int) error {
	c.cutItems++
	c.resHdr = c.resHdr[:0]
	it := fastpath.NewTopLevel(entry)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fScope {
			c.resHdr = append(c.resHdr, entry[f.Tag:f.End]...)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	// The scope entries, in runs whose piece fits.
	runFrom, runTo := -1, -1
	flush := func() {
		if runFrom >= 0 {
			c.emit(key, c.resHdr, entry[runFrom:runTo], nil)
			runFrom, runTo = -1, -1
		}
	}
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
		if fieldLen(len(c.resHdr)+f.End-f.Tag) > c.limit {
			flush()
			if err := c.cutScope(entry[f.Value:f.End], key); err != nil {
				return err
			}
			continue
		}
		if runFrom >= 0 && fieldLen(len(c.resHdr)+f.End-runFrom) > c.limit {
			flush()
		}
		if runFrom < 0 {
			runFrom = f.Tag
		}
		runTo = f.End
	}
	flush()
	return it.Err()
}

// cutScope cuts one scope entry (its body), larger than limit with its resource entry's
// header, between its items.
func (c *cutter) cutScope(scope []byte, key int) error {
	c.scopeHdr = c.scopeHdr[:0]
	it := fastpath.NewTopLevel(scope)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fItem {
			c.scopeHdr = append(c.scopeHdr, scope[f.Tag:f.End]...)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	fits := func(items int) bool {
		return fieldLen(len(c.resHdr)+fieldLen(len(c.scopeHdr)+items)) <= c.limit
	}
	runFrom, runTo := -1, -1
	flush := func() {
		if runFrom >= 0 {
			c.emit(key, c.resHdr, c.scopeHdr, scope[runFrom:runTo])
			runFrom, runTo = -1, -1
		}
	}
	for it = fastpath.NewTopLevel(scope); ; {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fItem {
			continue
		}
		if !fits(f.End - f.Tag) {
			flush()
			c.tooLarge++
			continue
		}
		if runFrom >= 0 && !fits(f.End-runFrom) {
			flush()
		}
		if runFrom < 0 {
			runFrom = f.Tag
		}
		runTo = f.End
	}
	flush()
	return it.Err()
}

// emit writes one piece into the buffer: a resource entry of resHdr and, without items,
// scopes (whole scope entries); with items, one scope entry of scopes (its header) and items.
func (c *cutter) emit(key int, resHdr, scopes, items []byte) {
	from := len(c.buf)
	body := len(resHdr) + len(scopes)
	if items != nil {
		body = len(resHdr) + fieldLen(len(scopes)+len(items))
	}
	c.buf = protowire.AppendTag(c.buf, fEntry, protowire.BytesType)
	c.buf = protowire.AppendVarint(c.buf, uint64(body))
	c.buf = append(c.buf, resHdr...)
	if items == nil {
		c.buf = append(c.buf, scopes...)
	} else {
		c.buf = protowire.AppendTag(c.buf, fScope, protowire.BytesType)
		c.buf = protowire.AppendVarint(c.buf, uint64(len(scopes)+len(items)))
		c.buf = append(c.buf, scopes...)
		c.buf = append(c.buf, items...)
	}
	c.pieces = append(c.pieces, piece{from: from, to: len(c.buf), inBuf: true, key: key})
}

// value is piece i's bytes; valid while the source and the cutter's buffer are, and only once
// the cut is over.
func (c *cutter) value(i int) []byte {
	p := &c.pieces[i]
	if p.inBuf {
		return c.buf[p.from:p.to:p.to]
	}
	return p.src[p.from:p.to:p.to]
}
