package codec

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	"github.com/otlpgate/otlpgate/pool"
)

// A gRPC server inflates a compressed message before any codec sees it, through the compressor
// registered for its grpc-encoding, and keeps nothing of the bytes that arrived. The one hook a
// server has of its own is a legacy Decompressor (grpc.RPCDecompressor), chosen over the registry
// for one encoding: WireDecompressor is that hook. It inflates as the registered compressor does
// (with its inflate budget and its window limits), and hands gRPC the decompressed message in a
// pooled buffer whose spare capacity, past the message's end, holds a trailer and the message as
// it arrived. gRPC checks the message's length against its receive limit and hands the slice to
// the codec untouched (a mem.SliceBuffer), so this package's codec finds the trailer there: a
// received Raw then also carries the compressed bytes (Raw.Wire), for the intake to batch as
// they are (fastpath's compressed pass-through), and any other message is decoded from the
// plain bytes. A codec that knows nothing of the trailer still reads the plain message.
//
// The trailer begins with a key drawn at random when the process starts, so a client cannot
// make a message of its own pass for one (a message sent uncompressed also reaches the codec as
// a mem.SliceBuffer when it is small); the codec clears the key before the buffer goes back to
// the pool, so no stale trailer is ever found in a recycled buffer.

// Trailer layout, at the plain message's end: key, compressed length, plain length (both
// little-endian uint32), encoding name's length and name; then the compressed bytes.
const (
	trailerKey   = 0
	trailerWire  = 8
	trailerPlain = 12
	trailerEnc   = 16
	trailerLen   = 24
)

// wireKey marks a trailer this process wrote.
var wireKey = func() (k [8]byte) {
	_, _ = rand.Read(k[:]) // crypto/rand.Read does not fail (it aborts the program instead)
	return k
}()

// Errors of WireDecompressor.
var (
	ErrWireEncoding = errors.New("codec: a wire decompressor needs a registered gzip or zstd compressor")
	errWireSize     = errors.New("codec: a compressed message larger than 4GiB")
)

// WireDecompressor is a grpc.Decompressor (see RPCDecompressor) for one encoding that keeps
// each message's compressed bytes beside the decompressed ones. Safe for concurrent use.
type WireDecompressor struct {
	name string
	comp encoding.Compressor
	max  int
}

// NewWireDecompressor returns the WireDecompressor of name (Gzip or Zstd), which inflates
// through the compressor registered under that name (register it first:
// RegisterCompressorsWith) and refuses a message that inflates past maxRecv bytes as gRPC's own
// path does: gRPC answers RESOURCE_EXHAUSTED.
func NewWireDecompressor(name string, maxRecv int) (*WireDecompressor, error) {
	c := encoding.GetCompressor(name)
	if (name != Gzip && name != Zstd) || c == nil || maxRecv <= 0 || maxRecv > 1<<31 {
		return nil, fmt.Errorf("%w: %q (max %d)", ErrWireEncoding, name, maxRecv)
	}
	return &WireDecompressor{name: name, comp: c, max: maxRecv}, nil
}

// Type returns the encoding's name, the grpc-encoding the server uses it for.
func (d *WireDecompressor) Type() string { return d.name }

// wireState is what one Do needs besides buffers: a reader of the compressed bytes that the
// pooled decompressors can hold as an io.Reader without an allocation.
type wireState struct{ src bytes.Reader }

var wireStates = pool.NewFreeList[wireState](64, nil)

// Do reads one compressed message from r and returns it inflated, with its trailer behind it.
// The slice is a pooled buffer that the codec gives back (or, if nobody claims it, the
// collector takes). Safe for concurrent use.
func (d *WireDecompressor) Do(r io.Reader) ([]byte, error) {
	wb, err := readCompressed(r)
	if err != nil {
		return nil, err
	}
	defer pool.PutBytes(wb)
	wire := *wb
	if len(wire) > 1<<32-1 {
		return nil, errWireSize
	}
	st := wireStates.Get()
	defer func() { st.src.Reset(nil); wireStates.Put(st) }()
	st.src.Reset(wire)
	dr, err := d.comp.Decompress(&st.src)
	if err != nil {
		return nil, err
	}
	plain, out, err := d.inflate(dr, wire)
	if c, ok := dr.(io.Closer); ok {
		c.Close() // returns the claim on the inflate budget, as gRPC's own path does
	}
	if err != nil {
		return nil, err
	}
	if len(plain) > d.max {
		// gRPC refuses a message longer than its limit with RESOURCE_EXHAUSTED, as for a
		// message it inflated itself; it drops the slice, which the collector takes.
		return plain, nil
	}
	t := plain[len(plain) : len(plain)+trailerLen+len(wire)]
	copy(t[trailerKey:], wireKey[:])
	binary.LittleEndian.PutUint32(t[trailerWire:], uint32(len(wire)))
	binary.LittleEndian.PutUint32(t[trailerPlain:], uint32(len(plain)))
	t[trailerEnc] = byte(len(d.name))
	copy(t[trailerEnc+1:trailerLen], d.name)
	copy(t[trailerLen:], wire)
	*out = nil
	holders.Put(out)
	return plain, nil
}

// inflate reads dr into a pooled buffer (out) that keeps room for the trailer and wire behind
// the output, reading at most max+1 bytes. The buffer starts at what FreeInflate allows and
// grows to the size the stream announces only once that much was produced (by then the
// compressor holds its claim on the inflate budget), so a message that lies about its size
// makes nothing large held.
func (d *WireDecompressor) inflate(dr io.Reader, wire []byte) (plain []byte, out *[]byte, err error) {
	tail := trailerLen + len(wire)
	limit := d.max + 1
	// One byte past the announced size leaves room for the read that reports the end.
	want := FreeInflate
	if hint := d.sizeHint(wire); hint > 0 {
		want = min(hint+1, limit)
	}
	out = pool.GetBytes(min(want, FreeInflate) + tail)
	plain = (*out)[:0]
	for len(plain) < limit {
		room := cap(plain) - len(plain) - tail
		if room <= 0 {
			grown := max(2*len(plain), 4<<10)
			if len(plain) >= FreeInflate {
				grown = max(grown, want)
			}
			nb := pool.GetBytes(grown + tail)
			*nb = append(*nb, plain...)
			pool.PutBytes(out)
			out, plain = nb, *nb
			continue
		}
		n, rerr := dr.Read(plain[len(plain) : len(plain)+min(room, limit-len(plain))])
		plain = plain[:len(plain)+n]
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			pool.PutBytes(out)
			return nil, nil, rerr
		}
	}
	return plain, out, nil
}

// sizeHint is the decompressed size the message announces, or 0: gzip's trailer holds it
// (modulo 2^32, for the last member only, so it is a hint) and is capped by d.max+1.
func (d *WireDecompressor) sizeHint(wire []byte) int {
	if d.name != Gzip || len(wire) < 18 {
		return 0
	}
	return min(int(binary.LittleEndian.Uint32(wire[len(wire)-4:])), d.max)
}

// readCompressed copies the compressed message r reads (a *mem.Reader, which tells its length)
// into a pooled buffer.
func readCompressed(r io.Reader) (*[]byte, error) {
	n := 0
	if rr, ok := r.(interface{ Remaining() int }); ok {
		n = rr.Remaining()
	}
	b := pool.GetBytes(max(n, 512))
	for {
		if len(*b) == cap(*b) {
			nb := pool.GetBytes(2 * cap(*b))
			*nb = append(*nb, *b...)
			pool.PutBytes(b)
			b = nb
		}
		k, err := r.Read((*b)[len(*b):cap(*b)])
		*b = (*b)[:len(*b)+k]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			pool.PutBytes(b)
			return nil, err
		}
	}
}

// wireMsg is a decompressed message WireDecompressor produced, found by the codec.
type wireMsg struct {
	plain, wire []byte
	enc         string
	full        []byte // the whole pooled buffer, given back by release
}

// findWire reports whether data is one message WireDecompressor produced.
func findWire(data mem.BufferSlice) (wireMsg, bool) {
	if len(data) != 1 {
		return wireMsg{}, false
	}
	sb, ok := data[0].(mem.SliceBuffer)
	if !ok {
		return wireMsg{}, false
	}
	return findWireIn(sb)
}

// findWireIn reports whether plain is a message WireDecompressor produced, its trailer in
// plain's spare capacity.
func findWireIn(plain []byte) (wireMsg, bool) {
	full := plain[:cap(plain)]
	t := full[len(plain):]
	if len(t) < trailerLen || [8]byte(t[trailerKey:trailerWire]) != wireKey {
		return wireMsg{}, false
	}
	wl := int(binary.LittleEndian.Uint32(t[trailerWire:]))
	pl := int(binary.LittleEndian.Uint32(t[trailerPlain:]))
	el := int(t[trailerEnc])
	if pl != len(plain) || wl > len(t)-trailerLen || el > trailerLen-trailerEnc-1 {
		return wireMsg{}, false
	}
	var enc string
	switch string(t[trailerEnc+1 : trailerEnc+1+el]) { // compared without an allocation
	case Gzip:
		enc = Gzip
	case Zstd:
		enc = Zstd
	default:
		return wireMsg{}, false
	}
	return wireMsg{plain: plain, wire: t[trailerLen : trailerLen+wl], enc: enc, full: full}, true
}

// releaseWire gives back the buffer of a message WireDecompressor produced, once it was decoded
// (UnmarshalVT and proto.Unmarshal copy what they keep); anything else is left to gRPC.
func releaseWire(data mem.BufferSlice) {
	if w, ok := findWire(data); ok {
		w.release()
	}
}

// release clears the trailer's key and gives the buffer back to the pool. The message must
// not be read afterwards.
func (w *wireMsg) release() {
	if w.full == nil {
		return
	}
	clear(w.full[len(w.plain) : len(w.plain)+trailerWire])
	h := holders.Get()
	*h = w.full[:0]
	pool.PutBytes(h)
	*w = wireMsg{}
}

// holders are the empty *[]byte a buffer of Do went out without: pool.PutBytes takes one back
// with each buffer the codec gives back.
var holders = pool.NewFreeList[[]byte](256, nil)
