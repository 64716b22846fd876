package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/pool"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// OTEP on otlpgate's own transport. A stream (StreamExporter) is one HTTP/2 stream carrying
// the lane's requests one after the other, each a gRPC message written with writev from the
// batch's bytes, and the server's answers the other way, which the stream's receiver reads
// in whatever order they come. The lane, the receiver, the ack table and the sweeper are
// grpc-go's path's (stream.go): h2Bidi stands where grpc-go's ClientStream does, with the same
// results (io.EOF from SendMsg once the stream is over, the stream's status from RecvMsg at its
// end, cancellation through the stream's context).

// streamConn is what a lane and its receiver use of a stream: grpc-go's ClientStream or the
// own transport's h2Bidi.
type streamConn interface {
	SendMsg(m any) error
	RecvMsg(m any) error
	CloseSend() error
}

var (
	_ streamConn = (*h2Bidi)(nil)
	_ streamConn = grpc.ClientStream(nil)
)

// h2EntryTag is the tag byte written before each resource entry after the first (frame.go).
var h2EntryTag = []byte{tagEntry}

// h2Msg builds the gRPC message of a request as segments for writeMsg: the 5-byte prefix, then
// the bytes of the message, views of the batch's payload where they can be.
type h2Msg struct {
	head   [5 + 1 + binary.MaxVarintLen64 + 1]byte // gRPC prefix, OTEP id field, first entry tag
	segs   [][]byte
	copied *[]byte   // the pooled OTEP copy of a frame that is not sent by views
	out    bufWriter // the compressed message
}

// otep returns the segments of the OTEP request f, compressed with comp when it is not nil,
// and their length. Valid until release; f must stay referenced until then.
//
// As on grpc-go's path (frame.marshal) the request is the batch's v1 body with the id in
// front and each entry's tag byte changed, so the views are the body between the tag bytes,
// with a one-byte segment for each new tag: nothing of the body is copied. Here a view costs
// an element of the write's vector only, so every canonical body goes by views; one whose
// entry tags take more than one byte is written again with fastpath.AppendOTEP.
func (m *h2Msg) otep(f *frame, comp encoding.Compressor) (segs [][]byte, total int, err error) {
	var size int
	canonical := len(f.cuts) > 0
	for _, c := range f.cuts {
		if c >= int32(len(f.body)) || f.body[c] != tagV1 {
			canonical = false
		}
	}
	if !canonical {
		m.copied = pool.GetBytes(max(f.size, 1))
		out, err := fastpath.AppendOTEP((*m.copied)[:0], f.id, f.body)
		if err != nil {
			return nil, 0, err
		}
		*m.copied = out
		m.segs = append(m.segs[:0], m.head[:5], out)
		size = len(out)
	} else {
		k := 5
		if f.id != 0 {
			m.head[k] = tagID
			k++
			k += binary.PutUvarint(m.head[k:], f.id)
		}
		pos, i := 0, 0
		if f.cuts[0] == 0 {
			m.head[k] = tagEntry
			k++
			pos, i = 1, 1
		}
		skip := pos
		m.segs = append(m.segs[:0], m.head[:k])
		for ; i < len(f.cuts); i++ {
			c := int(f.cuts[i])
			m.segs = append(m.segs, f.body[pos:c], h2EntryTag)
			pos = c + 1
		}
		m.segs = append(m.segs, f.body[pos:])
		// Each new tag takes the place of the old one; the first entry's, when it leads the
		// body, is in the head.
		size = k - 5 + len(f.body) - skip
	}
	return m.finish(size, comp)
}

// raw returns the segments of a message whose bytes are b (a probe's empty request).
func (m *h2Msg) raw(b []byte, comp encoding.Compressor) (segs [][]byte, total int, err error) {
	m.segs = append(m.segs[:0], m.head[:5], b)
	return m.finish(len(b), comp)
}

// finish writes the prefix of a message of size bytes in m.segs, compressing it first when
// comp is set.
func (m *h2Msg) finish(size int, comp encoding.Compressor) (segs [][]byte, total int, err error) {
	if comp == nil {
		grpcHead(m.head[:5], size, false)
		return m.segs, 5 + size, nil
	}
	m.out.b = pool.GetBytes(size + size/64 + 1024)
	zw, err := comp.Compress(&m.out)
	if err != nil {
		return nil, 0, err
	}
	for i, b := range m.segs {
		if i == 0 {
			b = b[5:]
		}
		if _, err := zw.Write(b); err != nil {
			zw.Close()
			return nil, 0, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, 0, err
	}
	z := *m.out.b
	m.segs = append(m.segs[:0], grpcHead(m.head[:5], len(z), true), z)
	return m.segs, 5 + len(z), nil
}

// release gives back the message's buffers once it was written.
func (m *h2Msg) release() {
	if m.copied != nil {
		pool.PutBytes(m.copied)
		m.copied = nil
	}
	m.out.release()
	clear(m.segs)
	m.segs = m.segs[:0]
}

// h2Bidi is an OTEP stream on the own transport, the streamConn of a stream object
// (stream.go) when the destination has transport=otlpgate: made with the object, it serves
// every stream the object carries.
//
// The lane calls open, SendMsg and CloseSend; the receiver calls RecvMsg; cancel runs on
// whoever cancels the stream's context (the lane, the receiver, the sweeper, the open timer,
// the destination stopping). The connection's reader fills the stream's answer bytes and
// completes it (h2Stream.finish) when it ends; whoever cancels it resets it and completes it
// if it was still open. Each stream opened is thus completed once, and its receiver takes
// that token before RecvMsg returns the stream's end, so that the next stream of the object
// starts clean.
type h2Bidi struct {
	d        *Dest
	st       *h2Stream
	comp     encoding.Compressor
	cancelFn func() // cancel, made once: registered with the stream's context at each open

	cancelled atomic.Bool
	cmu       sync.Mutex // c for cancel; the lane writes it at open
	c         *h2Conn

	// msg builds the messages: the lane's, set by the lane before each send (lane.send), so
	// that its segment list grows once per lane rather than once per stream object.
	msg *h2Msg

	// The receiver's.
	in       []byte // the message being decoded
	plain    []byte // its decompressed bytes
	finished bool   // the stream's completion token was taken
}

func newH2Bidi(d *Dest) *h2Bidi {
	st := newH2Stream()
	st.bidi, st.more = true, make(chan struct{}, 1)
	b := &h2Bidi{d: d, st: st, in: make([]byte, 0, 64)}
	if c := d.cfg.compressor(); c != "" {
		b.comp = encoding.GetCompressor(c) // newDest checked it is registered
	}
	b.cancelFn = b.cancel
	return b
}

// errH2NoStream is an open that found no connection taking new streams after trying several.
var errH2NoStream = status.Error(codes.Unavailable, "client: the upstream took no new stream on any connection")

// open opens a stream of sig on the destination's connection, dialling one if needed. ctx
// cancels the stream (its open included), as grpc-go's NewStream's context does.
func (b *h2Bidi) open(ctx context.Context, sig fastpath.Signal) error {
	d := b.d
	b.cancelled.Store(false)
	b.finished = false
	select {
	case <-b.st.more: // the last stream's
	default:
	}
	if cc, ok := ctx.(*callContext); ok {
		cc.AfterFunc(b.cancelFn) // the slot is freed by the stream object's ctx.end
	} else {
		context.AfterFunc(ctx, b.cancelFn) // a probe's: after its end, a cancel finds nothing open
	}
	for range h2MaxRefused {
		if b.cancelled.Load() {
			return status.FromContextError(context.Canceled).Err()
		}
		c, err := d.h2.get()
		if err == errH2Stopped {
			return status.Error(codes.Canceled, err.Error())
		}
		if err != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
		b.cmu.Lock()
		b.c = c
		b.cmu.Unlock()
		if c.open(b.st, d.h2.headers[sig], &b.cancelled) {
			return nil
		}
	}
	return errH2NoStream
}

// cancel ends the stream from this side (RST_STREAM CANCEL), or the open under way. Safe for
// concurrent use.
func (b *h2Bidi) cancel() {
	b.cancelled.Store(true)
	b.cmu.Lock()
	c := b.c
	b.cmu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	c.mu.cond.Broadcast() // an open waiting for a stream slot looks at cancelled
	c.mu.Unlock()
	if c.reset(b.st, http2.ErrCodeCancel) {
		b.st.finish(status.FromContextError(context.Canceled).Err(), false)
		c.closeIfDrained()
	}
}

// SendMsg writes a request (a *frame, or a probe's *codec.Raw) on the stream, waiting for
// flow-control window as needed. io.EOF: the stream is over, RecvMsg tells why.
func (b *h2Bidi) SendMsg(m any) error {
	var (
		segs  [][]byte
		total int
		err   error
	)
	switch v := m.(type) {
	case *frame:
		segs, total, err = b.msg.otep(v, b.comp)
	case *codec.Raw:
		segs, total, err = b.msg.raw(v.Bytes(), b.comp)
	default:
		err = fmt.Errorf("client: cannot send %T on a stream", m)
	}
	if err != nil {
		b.msg.release()
		return status.Errorf(codes.Internal, "client: cannot encode the request: %v", err)
	}
	ok := b.c.writeMsg(b.st, segs, total, false)
	b.msg.release()
	if !ok {
		return io.EOF
	}
	return nil
}

// CloseSend half-closes the stream: an empty DATA frame with END_STREAM.
func (b *h2Bidi) CloseSend() error {
	b.c.closeSend(b.st)
	return nil
}

// RecvMsg reads the next answer into m, an *otepv1.ExportResponse; at the stream's end it
// returns io.EOF (grpc-status 0) or the stream's status, as grpc-go does.
func (b *h2Bidi) RecvMsg(m any) error {
	resp, ok := m.(*otepv1.ExportResponse)
	if !ok {
		return b.abort(status.Errorf(codes.Internal, "client: cannot read an answer into %T", m))
	}
	c, st := b.c, b.st
	limit := b.d.cfg.MaxRecvMsgSize
	for {
		c.mu.Lock()
		if have := len(st.resp); have >= 5 {
			n := int(binary.BigEndian.Uint32(st.resp[1:5]))
			if n > limit {
				c.mu.Unlock()
				return b.abort(status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, limit))
			}
			if have >= 5+n {
				b.in = append(b.in[:0], st.resp[:5+n]...)
				st.resp = st.resp[:copy(st.resp, st.resp[5+n:])]
				c.mu.Unlock()
				if err := b.decode(resp, limit); err != nil {
					return b.abort(err)
				}
				return nil
			}
		}
		c.mu.Unlock()
		if b.finished {
			return st.endStatus()
		}
		select {
		case <-st.more:
		case <-st.done:
			b.finished = true // what came before the end is read first
		}
	}
}

// decode reads the answer in b.in into resp.
func (b *h2Bidi) decode(resp *otepv1.ExportResponse, limit int) error {
	msg := b.in[5:]
	switch b.in[0] {
	case 0:
	case 1:
		var err error
		if b.plain, msg, err = inflateInto(b.plain, msg, b.comp, limit); err != nil {
			if err == errH2AnswerTooLarge {
				return status.Errorf(codes.ResourceExhausted, "grpc: received message after decompression larger than max %d", limit)
			}
			return err
		}
	default:
		return status.Error(codes.Internal, "the upstream's answer has a bad compressed flag")
	}
	resp.Reset()
	if err := resp.UnmarshalVT(msg); err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return nil
}

// abort ends the stream for an answer that cannot be read, and returns err: the receiver
// stops at it.
func (b *h2Bidi) abort(err error) error {
	if !b.c.reset(b.st, http2.ErrCodeCancel) && !b.finished {
		<-b.st.done // it ended meanwhile: its token is coming
	}
	b.finished = true
	b.c.closeIfDrained()
	return err
}

// endStatus is what RecvMsg returns at the end of a stream: io.EOF when it ended with
// grpc-status 0, else its status.
func (st *h2Stream) endStatus() error {
	if err := st.callStatus(); err != nil {
		return err
	}
	return io.EOF
}

// closeSend half-closes st, if it is still open: an empty DATA frame with END_STREAM.
func (c *h2Conn) closeSend(st *h2Stream) {
	c.wmu.Lock()
	c.mu.Lock()
	open := st.open
	c.mu.Unlock()
	var err error
	if open {
		c.wbuf = h2.AppendFrameHeader(c.wbuf[:0], h2.FrameHeader{Type: http2.FrameData, Flags: http2.FlagDataEndStream, StreamID: st.id})
		_, err = c.nc.Write(c.wbuf)
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
	}
}
