package codec

import (
	"google.golang.org/grpc/mem"

	"github.com/otlpgate/otlpgate/pool"
)

// Raw is a gRPC message carried as its encoded bytes, never decoded: the proxy path. Send one
// by setting a payload or bytes and passing it to SendMsg or Invoke; receive one by passing an
// empty Raw to RecvMsg (or as the reply of Invoke) on a connection that uses this package's
// codec.
//
// A Raw owns what it holds and gives it back on Release:
//
//   - SetPayload hands it one reference to a pool.Payload. Marshal takes a further reference for
//     gRPC, which the transport releases once it has written the bytes, so the Raw (and the
//     caller's own references) may be released as soon as SendMsg returns; the payload goes back
//     to its pool when the last of them is released, whichever that is.
//   - SetBytes lends it a plain slice. It is sent without a copy when its capacity exceeds 1 KiB,
//     and gRPC may still be writing it after SendMsg returns, so the slice must stay unmodified
//     until the call completes; use a Payload to learn exactly when the bytes are free.
//   - A received Raw keeps gRPC's receive buffer by reference when the message arrived in one
//     buffer (it fits one HTTP/2 frame, or was decompressed into one chunk) and a copy in a
//     pooled Payload otherwise. Either way its bytes stay valid until Release; a reference pins
//     the whole frame buffer it is a view of, so release promptly.
//
// grpc.PreparedMsg keeps its encoding for reuse and never frees it: a Raw payload encoded that
// way is never released, so do not prepare Raw messages.
//
// The zero Raw is empty and ready to use. A Raw must not be copied once it holds something
// (the copy would own the same reference), and it belongs to one goroutine at a time.
type Raw struct {
	b       []byte
	payload *pool.Payload // a reference owned by the Raw, or nil
	held    mem.Buffer    // a reference to gRPC's receive buffer owned by the Raw, or nil
	// copied: payload is the Raw's own copy of a message received in several buffers, which
	// nobody else references (see Owned).
	copied bool
	// wire: the message arrived compressed and a WireDecompressor kept its bytes (Wire); it
	// owns the pooled buffer both live in.
	wire wireMsg
}

// SetPayload releases what r held and makes it carry p, taking over one reference the caller
// holds (typically `r.SetPayload(p.Retain())`). Owning goroutine only.
func (r *Raw) SetPayload(p *pool.Payload) {
	r.Release()
	r.payload = p
	r.b = p.Bytes()
}

// SetBytes releases what r held and makes it carry b, which r borrows: b must stay unmodified
// until the call that sends it completes, and r never frees it. Owning goroutine only.
func (r *Raw) SetBytes(b []byte) {
	r.Release()
	r.b = b
}

// Bytes returns the encoded message. It is valid until r is released or reused, and must not be
// modified. Owning goroutine only.
func (r *Raw) Bytes() []byte { return r.b }

// Len returns the length of the encoded message. Owning goroutine only.
func (r *Raw) Len() int { return len(r.b) }

// Payload returns the payload r carries, or nil when it carries plain bytes or a received buffer
// held by reference. The reference stays r's: Retain it to keep the payload beyond r's Release.
// Owning goroutine only.
func (r *Raw) Payload() *pool.Payload { return r.payload }

// Release gives back what r holds (the payload reference, or the receive buffer reference) and
// leaves r empty and reusable. Releasing an empty Raw does nothing. Owning goroutine only; the
// references it drops may be shared with other goroutines.
func (r *Raw) Release() {
	if r.payload != nil {
		r.payload.Release()
	}
	if r.held != nil {
		r.held.Free()
	}
	r.wire.release()
	*r = Raw{}
}

// Wire returns the message as it arrived, compressed in enc (Gzip or Zstd), when the server's
// WireDecompressor kept it; nil and "" otherwise. Bytes is then its decompressed form. Valid
// until r is released or reused, like Bytes. Owning goroutine only.
func (r *Raw) Wire() (wire []byte, enc string) { return r.wire.wire, r.wire.enc }

// Reset is Release, under the name decoders use for "empty, ready to reuse". A Raw is never
// emptied without giving back what it holds, so reusing one cannot leak a pooled buffer.
// Owning goroutine only.
func (r *Raw) Reset() { r.Release() }

// receive replaces r's content with data, which gRPC frees when Unmarshal returns.
func (r *Raw) receive(data mem.BufferSlice) {
	r.Release()
	switch len(data) {
	case 0:
		return
	case 1:
		if w, ok := findWire(data); ok {
			// A WireDecompressor's buffer: gRPC's Free does nothing to it, r gives it back.
			r.wire, r.b = w, w.plain
			return
		}
		// Our own reference keeps the bytes alive after gRPC frees its own. Free is atomic, so it
		// may run on any goroutine, whichever of the two references goes last.
		data[0].Ref()
		r.held = data[0]
		r.b = data[0].ReadOnlyData()
		return
	}
	// The buffers are frames of the connection's receive pool. Keeping references to all of them
	// would work too, but the bytes must be contiguous for anyone to scan them, so copy once.
	n := data.Len()
	p := pool.NewPayload(n)
	b := p.Buf()
	*b = (*b)[:n]
	data.CopyTo(*b)
	r.payload, r.copied = p, true
	r.b = *b
}

// Owned returns the pooled buffer holding a received message when r alone holds it (the
// message arrived in several buffers and r copied it into one), for an admitter to take over
// rather than copy (pipeline.Request.Own), which may exchange its content for another pooled
// buffer; nil when r holds gRPC's receive buffer by reference, or bytes it was given. Once the
// buffer is handed on, Bytes (and any slice of it taken before) must not be read: Release r,
// which returns whatever the buffer then holds to the pool. Owning goroutine only.
func (r *Raw) Owned() *[]byte {
	if !r.copied {
		return nil
	}
	return r.payload.Buf()
}

// marshalRaw hands r's bytes to gRPC. A payload is shared, with a reference for gRPC; plain
// bytes are lent; either is copied instead into a pooled buffer when its capacity is too small
// for mem to track (see MinTracked), which costs a copy of at most 1 KiB.
func (c *grpcCodec) marshalRaw(r *Raw) mem.BufferSlice {
	if len(r.b) == 0 {
		return nil
	}
	if cap(r.b) < MinTracked {
		buf := c.pool.Get(MinTracked)
		*buf = append((*buf)[:0], r.b...)
		return sendPooled(buf, c.pool)
	}
	if r.payload != nil {
		return sendShared(r.b, r.payload.Retain())
	}
	return sendShared(r.b, nil)
}
