package client

import (
	"encoding/binary"
	"errors"
	"sync/atomic"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// An OTEP request is the v1 body with the id at field 1 in front and every resource entry
// re-tagged from field 1 (tag byte 0x0a) to field 2 (0x12). Only those tag bytes differ, so
// the request is sent as a mem.BufferSlice that interleaves small header buffers with views of
// the shared payload:
//
//	[08 <id varint> 12] [len+entry 1] [12] [len+entry 2] ... [12] [len+entry n]
//
// The views point into the payload's own bytes: nothing of the body is copied, however many
// destinations send the same payload. A view costs two pooled mem.Buffers and the transport's
// walk over them, which is more than copying a few hundred bytes, so payloads whose entries
// average under viewMinEntry bytes are copied once per attempt into a pooled buffer with
// fastpath.AppendOTEP instead, as are payloads too small for gRPC to track by reference (at
// most 1 KiB) and the non-canonical ones whose field-1 tags take more than one byte.
// BenchmarkFrame (frame_bench_test.go) puts the break-even near 1 KiB per entry: with 265-byte
// entries views take twice the time of a copy, at 1 KiB they are even, at 8 KiB a copy costs
// 60% more. Entries are whole resources of the requests batched together (an SDK export of a
// few hundred spans is one entry of tens of KiB), so in practice the body is not copied.
const viewMinEntry = 1024

const (
	tagID    = 1<<3 | byte(protowire.VarintType)
	tagV1    = 1<<3 | byte(protowire.BytesType)
	tagEntry = 2<<3 | byte(protowire.BytesType)
)

// entryTag is the one-byte buffer between views. It is never freed: SliceBuffer's Free does
// nothing, and its bytes are static.
var entryTag mem.Buffer = mem.SliceBuffer{tagEntry}

var errFrameInvalid = errors.New("client: payload is not a v1 request body")

// frame is one OTEP request in flight: the codec marshals it into buffers that share the
// payload (see above).
//
// Invariants:
//
//  1. refs counts the sender (from getFrame until it calls unref after SendMsg or Invoke
//     returns) and gRPC (from Marshal until its last reference to the buffers is freed). The
//     last unref releases the payload reference and returns the frame to its pool.
//  2. gRPC's references are counted by one root mem.Buffer over the payload bytes (or over the
//     copy): every view is a Slice of it, so the root's pool (the frame) gets Put exactly once,
//     when the last view is freed.
//  3. bufs, hdr and hdrs stay untouched until that Put. gRPC reads and frees the elements of a
//     BufferSlice in order and the last element is always a view, so nobody reads the array
//     or a header after the Put.
type frame struct {
	codec.FreeNotice // the root buffer's pool: Put below is gRPC's notice (codec.Track)
	refs             atomic.Int32
	id               uint64
	payload          *pool.Payload // the frame's own reference
	body             []byte        // payload bytes: the v1 body
	cuts             []int32       // offset in body of each field-1 entry's tag byte
	copy             bool          // marshal by copying (see above)
	size             int           // encoded size
	data             []byte        // what the root buffer points at
	copyBuf          *[]byte       // the pooled copy, when copy is set
	hdr              [1 + binary.MaxVarintLen64 + 1]byte
	hdrs             [1 + binary.MaxVarintLen64 + 2]mem.Buffer // hdrs[n] is hdr[:n], boxed when the frame is made
	bufs             []mem.Buffer
}

// frames recycles frames through a free list that collections do not empty (a sync.Pool
// would make frames again after each one, and a new frame grows its cuts and bufs again). It
// holds what destinations may have in flight at once with room to spare (a destination's
// default is 2 streams of 64 requests). A new frame boxes each of its header lengths at once:
// boxed on first use instead, a frame would allocate whenever an id's varint grew a byte, for
// as long as the process runs.
var frames = pool.NewFreeList(maxFreeFrames, makeFrame)

const maxFreeFrames = 1024

// frameEntries is the entries a new frame has room for before its cuts and bufs grow: a batch
// of up to eight requests of one resource each.
const frameEntries = 8

func makeFrame() *frame {
	f := &frame{cuts: make([]int32, 0, frameEntries), bufs: make([]mem.Buffer, 0, 2*frameEntries+1)}
	for n := range f.hdrs {
		f.hdrs[n] = mem.SliceBuffer(f.hdr[:n])
	}
	return f
}

// prefillFrames tops the frames' free list up to n frames, so that the sends of a starting
// destination's first windows find them made. Safe for concurrent use; concurrent callers may
// together add a few more.
func prefillFrames(n int) {
	for range min(n, maxFreeFrames) - frames.Len() {
		frames.Put(makeFrame())
	}
}

// newFrame returns a frame holding its own reference to p for request id, with the sender's
// reference, or errFrameInvalid when p's top level is not a v1 body (then nothing is held).
func newFrame(id uint64, p *pool.Payload) (*frame, error) {
	f := frames.Get()
	if err := f.prepare(id, p.Bytes()); err != nil {
		f.reset()
		frames.Put(f)
		return nil, err
	}
	f.payload = p.Retain()
	f.refs.Store(1)
	return f, nil
}

// prepare finds the entries of body and decides how to marshal it.
func (f *frame) prepare(id uint64, body []byte) error {
	f.id, f.body, f.cuts, f.copy = id, body, f.cuts[:0], false
	// The same walk as fastpath's conversion, so that the frame refuses exactly what
	// AppendOTEP refuses.
	it := fastpath.NewTopLevel(body)
	for fl, ok := it.Next(); ok; fl, ok = it.Next() {
		switch fl.Num {
		case 1:
			if fl.Type != protowire.BytesType {
				return errFrameInvalid
			}
			if fl.TagLen() != 1 {
				f.copy = true // a long tag: AppendOTEP writes the short one
			}
			f.cuts = append(f.cuts, int32(fl.Tag))
		case 2:
			return errFrameInvalid // OTEP's entry field: carrying it would invent an entry
		}
	}
	if it.Err() != nil {
		return errFrameInvalid
	}
	f.size = fastpath.OTEPSize(id, body)
	if len(f.cuts) == 0 || cap(body) < codec.MinTracked || len(body) < viewMinEntry*len(f.cuts) {
		f.copy = true
	}
	return nil
}

// unref drops one reference (invariant 1).
func (f *frame) unref() {
	switch n := f.refs.Add(-1); {
	case n == 0:
		f.payload.Release()
		f.reset()
		frames.Put(f)
	case n < 0:
		panic("BUG: client: frame released too often")
	}
}

func (f *frame) reset() {
	clear(f.bufs)
	f.id, f.payload, f.body, f.data, f.copyBuf, f.bufs = 0, nil, nil, nil, nil, f.bufs[:0]
	f.cuts = f.cuts[:0]
}

// marshal builds the buffers for gRPC and takes gRPC's reference.
func (f *frame) marshal() (mem.BufferSlice, error) {
	f.refs.Add(1)
	if f.copy {
		buf := pool.GetBytes(max(f.size, codec.MinTracked))
		out, err := fastpath.AppendOTEP((*buf)[:0], f.id, f.body)
		if err != nil {
			// prepare checked the top level; AppendOTEP checks nothing more.
			pool.PutBytes(buf)
			f.unref()
			return nil, err
		}
		*buf = out
		f.copyBuf = buf
		f.bufs = append(f.bufs[:0], codec.Track(buf, f))
		return f.bufs, nil
	}
	f.data = f.body
	root := codec.Track(&f.data, f)
	n := 0
	f.hdr[n] = tagID
	n++
	n += binary.PutUvarint(f.hdr[n:], f.id)
	pos, i := 0, 0
	if f.cuts[0] == 0 {
		f.hdr[n] = tagEntry
		n++
		pos, i = 1, 1
	}
	f.bufs = append(f.bufs[:0], f.header(n))
	for ; i < len(f.cuts); i++ {
		c := int(f.cuts[i])
		f.bufs = append(f.bufs, root.Slice(pos, c), entryTag)
		pos = c + 1
	}
	f.bufs = append(f.bufs, root.Slice(pos, len(f.body)))
	root.Free() // the views hold the root now
	return f.bufs, nil
}

// header returns hdr[:n] as a buffer, boxed when the frame was made.
func (f *frame) header(n int) mem.Buffer { return f.hdrs[n] }

// Put is mem's notice that gRPC freed its last reference to the frame's buffers. It runs on
// whichever goroutine freed it.
func (f *frame) Put(*[]byte) {
	if f.copyBuf != nil {
		pool.PutBytes(f.copyBuf)
		f.copyBuf = nil
	}
	f.unref()
}

// frameCodec is codec.New's codec that also marshals frames. Safe for concurrent use.
type frameCodec struct{ inner encoding.CodecV2 }

func newFrameCodec() *frameCodec { return &frameCodec{inner: codec.New(codec.MemPool{})} }

func (c *frameCodec) Name() string { return codec.Name }

func (c *frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		return f.marshal()
	}
	return c.inner.Marshal(v)
}

func (c *frameCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.inner.Unmarshal(data, v)
}
