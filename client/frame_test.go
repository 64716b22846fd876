package client

import (
	"bytes"
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// payloadOf copies body into a pooled payload with at least capacity bytes of room.
func payloadOf(body []byte, capacity int) *pool.Payload {
	p := pool.NewPayload(max(len(body), capacity))
	b := p.Buf()
	*b = append(*b, body...)
	return p
}

// within reports whether b's bytes lie inside the array of outer.
func within(b, outer []byte) bool {
	if len(b) == 0 || cap(outer) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(outer[:1])))
	hi := lo + uintptr(cap(outer))
	p := uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p+uintptr(len(b)) <= hi
}

// marshalFrame marshals a frame for id over p and returns the wire bytes, the buffers gRPC
// would get, and a func that frees them as gRPC would.
func marshalFrame(t *testing.T, id uint64, p *pool.Payload) (wire []byte, bufs mem.BufferSlice, free func()) {
	t.Helper()
	f, err := newFrame(id, p)
	if err != nil {
		t.Fatal(err)
	}
	bufs, err = newFrameCodec().Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	f.unref() // the sender is done; gRPC's reference keeps the frame
	if bufs.Len() != f.size && f.payload != nil {
		t.Errorf("buffers hold %d bytes, frame promised %d", bufs.Len(), f.size)
	}
	return bufs.Materialize(), bufs, bufs.Free
}

// The OTEP request built by the frame is exactly fastpath.AppendOTEP's, on both paths, and on
// the view path every byte of the body is the payload's own memory, not a copy.
func TestFrameMatchesAppendOTEP(t *testing.T) {
	cases := []struct {
		name    string
		body    []byte
		viewed  bool
		capHint int
	}{
		{"large entries: views", traceBody("big", 4, 1200), true, 0},
		{"one large entry: views", traceBody("one", 1, 3000), true, 0},
		{"small entries: copy", traceBody("small", 20, 500), false, 0},
		{"small payload: copy", traceBody("tiny", 1, 300), false, 1024},
		{"unknown top-level field first: views", append([]byte{0x18, 0x07}, traceBody("u", 2, 1500)...), true, 0},
		{"unknown top-level field last: views", append(traceBody("u", 2, 1500), 0x18, 0x07), true, 0},
		{"long-form entry tag: copy", append([]byte{0x8a, 0x00, 0x00}, traceBody("l", 2, 1500)...), false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, id := range []uint64{1, 300, 1 << 63} {
				p := payloadOf(tc.body, max(tc.capHint, 64<<10))
				if tc.capHint != 0 {
					p.Release()
					p = pool.NewPayload(tc.capHint)
					*p.Buf() = append(*p.Buf(), tc.body...)
				}
				want, err := fastpath.AppendOTEP(nil, id, tc.body)
				if err != nil {
					t.Fatal(err)
				}
				wire, bufs, free := marshalFrame(t, id, p)
				if !bytes.Equal(wire, want) {
					t.Fatalf("id %d: frame bytes differ from AppendOTEP", id)
				}
				views := 0
				for _, b := range bufs {
					if within(b.ReadOnlyData(), p.Bytes()) {
						views++
					}
				}
				if tc.viewed && views == 0 || !tc.viewed && views != 0 {
					t.Errorf("id %d: %d of %d buffers are views of the payload, want views=%v", id, views, len(bufs), tc.viewed)
				}
				if tc.viewed {
					// Only header and tag buffers are not views; they hold 1 + varint + tags bytes.
					own := 0
					for _, b := range bufs {
						if !within(b.ReadOnlyData(), p.Bytes()) {
							own += b.Len()
						}
					}
					if own > 12+len(bufs)/2 {
						t.Errorf("id %d: %d bytes outside the payload", id, own)
					}
				}
				if got := p.Refs(); got != 2 {
					t.Errorf("payload refs while gRPC holds the frame = %d, want 2", got)
				}
				free()
				if got := p.Refs(); got != 1 {
					t.Errorf("payload refs after gRPC freed the frame = %d, want 1", got)
				}
				p.Release()
			}
		})
	}
}

// A body that is not a v1 request is refused before anything is sent, and nothing is held.
func TestFrameRejects(t *testing.T) {
	for name, body := range map[string][]byte{
		"field 2 at top level": append(traceBody("x", 1, 10), 0x12, 0x00),
		"entry as varint":      {0x08, 0x01},
		"truncated":            traceBody("x", 2, 2000)[:1500],
		"bad tag":              {0x00},
	} {
		t.Run(name, func(t *testing.T) {
			p := payloadOf(body, 4096)
			defer p.Release()
			if f, err := newFrame(7, p); err == nil {
				f.unref()
				t.Fatal("accepted")
			}
			if p.Refs() != 1 {
				t.Errorf("refs = %d after a refused frame", p.Refs())
			}
		})
	}
}

// gRPC's Reader frees buffers in order as it reads them: the frame must come back only after
// the last byte, and its bytes must stay right until then.
func TestFrameReaderFreesInOrder(t *testing.T) {
	body := traceBody("r", 5, 1500)
	p := payloadOf(body, 64<<10)
	defer p.Release()
	want, _ := fastpath.AppendOTEP(nil, 42, body)
	f, err := newFrame(42, p)
	if err != nil {
		t.Fatal(err)
	}
	bufs, _ := f.marshal()
	f.unref()
	r := bufs.Reader() // takes its own references, as the transport does
	bufs.Free()        // SendMsg's deferred free, before the transport wrote anything
	var got []byte
	chunk := make([]byte, 333)
	for {
		n, err := r.Read(chunk)
		got = append(got, chunk[:n]...)
		if err != nil || n == 0 {
			break
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes read through the Reader differ")
	}
	if p.Refs() != 1 {
		t.Errorf("payload refs after the Reader finished = %d, want 1", p.Refs())
	}
}
