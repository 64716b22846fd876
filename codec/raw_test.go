package codec

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"

	"github.com/otlpgate/otlpgate/pool"
)

// seq returns n bytes that differ from their neighbours, so a misplaced copy shows.
func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// frames splits b into mem buffers of at most size bytes, each from p, as gRPC's transport
// hands over a message that spans several HTTP/2 frames.
func frames(p mem.BufferPool, b []byte, size int) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		n := min(size, len(b))
		buf := p.Get(max(n, MinTracked))
		*buf = append((*buf)[:0], b[:n]...)
		out = append(out, mem.NewBuffer(buf, p))
		b = b[n:]
	}
	return out
}

func TestRawReceiveOneBufferByReference(t *testing.T) {
	cp := &countingPool{}
	c := New(cp)
	want := seq(5000)
	data := frames(cp, want, 1<<20)
	src := data[0].ReadOnlyData()
	var r Raw
	if err := c.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	data.Free() // what gRPC does when Unmarshal returns
	if cp.puts.Load() != 0 {
		t.Fatal("receive buffer went back to its pool while the Raw holds it")
	}
	if r.Payload() != nil || r.Owned() != nil {
		t.Fatal("single buffer was copied into a payload, or offered as owned")
	}
	if !bytes.Equal(r.Bytes(), want) || &r.Bytes()[0] != &src[0] {
		t.Fatal("Raw does not hold the received buffer itself")
	}
	r.Release()
	if cp.puts.Load() != 1 {
		t.Fatalf("after Release the pool got %d buffers back, want 1", cp.puts.Load())
	}
	if r.Len() != 0 || r.Bytes() != nil {
		t.Fatal("released Raw not empty")
	}
	r.Release() // releasing an empty Raw is a no-op
	if cp.puts.Load() != 1 {
		t.Fatal("second Release freed again")
	}
}

func TestRawReceiveManyBuffersCopies(t *testing.T) {
	cp := &countingPool{}
	c := New(cp)
	want := seq(40000)
	data := frames(cp, want, 16<<10)
	if len(data) != 3 {
		t.Fatalf("setup: %d frames", len(data))
	}
	var r Raw
	if err := c.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	data.Free()
	if cp.puts.Load() != 3 {
		t.Fatalf("frames returned: %d, want all 3 at once (the Raw holds a copy)", cp.puts.Load())
	}
	if !bytes.Equal(r.Bytes(), want) {
		t.Fatal("received bytes differ")
	}
	p := r.Payload()
	if p == nil || p.Refs() != 1 || !bytes.Equal(p.Bytes(), want) {
		t.Fatal("copy is not held in a payload with one reference")
	}
	if own := r.Owned(); own == nil || !bytes.Equal(*own, want) || &(*own)[0] != &r.Bytes()[0] {
		t.Fatal("the Raw's own copy is not offered as owned")
	}
	p.Retain()
	r.Reset()
	if p.Refs() != 1 {
		t.Fatalf("Reset left refs %d, want 1", p.Refs())
	}
	p.Release()
}

// Bytes a Raw was given, or a payload it was handed, are never offered as its own.
func TestRawOwnedOnlyItsCopy(t *testing.T) {
	var r Raw
	r.SetBytes(seq(100))
	if r.Owned() != nil {
		t.Fatal("lent bytes offered as owned")
	}
	p := pool.NewPayload(100)
	r.SetPayload(p.Retain())
	if r.Owned() != nil {
		t.Fatal("a shared payload offered as owned")
	}
	r.Release()
	p.Release()
}

func TestRawReceiveReplacesPrevious(t *testing.T) {
	c := New(MemPool{})
	p := pool.NewPayload(10)
	*p.Buf() = append(*p.Buf(), "old"...)
	var r Raw
	r.SetPayload(p.Retain())
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer("new")}, &r); err != nil {
		t.Fatal(err)
	}
	if p.Refs() != 1 {
		t.Fatalf("receiving into a used Raw left the old payload at %d refs, want 1", p.Refs())
	}
	if string(r.Bytes()) != "new" {
		t.Fatalf("Raw holds %q", r.Bytes())
	}
	if err := c.Unmarshal(nil, &r); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 0 {
		t.Fatalf("empty message left %d bytes", r.Len())
	}
	p.Release()
}

// A large payload goes out without a copy, with one reference for gRPC that the last Free gives
// back, however many references gRPC took in between.
func TestRawMarshalSharesPayload(t *testing.T) {
	cp := &countingPool{}
	c := New(cp)
	want := seq(3000)
	p := pool.NewPayload(len(want))
	*p.Buf() = append(*p.Buf(), want...)
	var r Raw
	r.SetPayload(p.Retain())

	out, err := c.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || !bytes.Equal(out[0].ReadOnlyData(), want) {
		t.Fatal("marshalled bytes differ")
	}
	if &out[0].ReadOnlyData()[0] != &p.Bytes()[0] {
		t.Fatal("payload was copied")
	}
	if p.Refs() != 3 || cp.gets.Load() != 0 {
		t.Fatalf("refs %d (want 3), pool gets %d (want 0)", p.Refs(), cp.gets.Load())
	}
	r.Release() // the sender may let go at once: gRPC has its own reference
	out.Ref()   // the transport takes one
	out.Free()  // SendMsg returns
	if p.Refs() != 2 {
		t.Fatalf("refs %d while the transport still writes, want 2", p.Refs())
	}
	out.Free() // the transport is done
	if p.Refs() != 1 {
		t.Fatalf("refs %d after gRPC is done, want 1", p.Refs())
	}
	p.Release()
}

// A payload too small for gRPC to track is copied into a pooled buffer; the payload is not
// referenced by gRPC at all, and the copy goes back to the pool when gRPC is done.
func TestRawMarshalCopiesSmallPayload(t *testing.T) {
	cp := &countingPool{}
	c := New(cp)
	p := pool.NewPayload(100) // 1 KiB tier: below what mem tracks
	*p.Buf() = append(*p.Buf(), seq(100)...)
	if cap(p.Bytes()) >= MinTracked {
		t.Fatalf("setup: payload cap %d", cap(p.Bytes()))
	}
	var r Raw
	r.SetPayload(p)
	out, err := c.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[0].ReadOnlyData(), seq(100)) || &out[0].ReadOnlyData()[0] == &p.Bytes()[0] {
		t.Fatal("small payload not copied correctly")
	}
	if p.Refs() != 1 {
		t.Fatalf("refs %d, want 1 (gRPC holds a copy, not a reference)", p.Refs())
	}
	out.Free()
	if cp.gets.Load() != 1 || cp.puts.Load() != 1 {
		t.Fatalf("pool gets %d puts %d, want 1 and 1", cp.gets.Load(), cp.puts.Load())
	}
	r.Release()
}

func TestRawMarshalBytes(t *testing.T) {
	cp := &countingPool{}
	c := New(cp)
	tests := []struct {
		name   string
		b      []byte
		shared bool
	}{
		{"large", seq(5000), true},
		{"small", seq(200), false},
		{"small slice of a large array", seq(5000)[:200], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Raw
			r.SetBytes(tt.b)
			out, err := c.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out[0].ReadOnlyData(), tt.b) {
				t.Fatal("marshalled bytes differ")
			}
			if shared := &out[0].ReadOnlyData()[0] == &tt.b[0]; shared != tt.shared {
				t.Fatalf("shared %v, want %v", shared, tt.shared)
			}
			out.Free()
			r.Release()
			if string(tt.b[:3]) != string(seq(3)) {
				t.Fatal("caller's bytes were modified")
			}
		})
	}
}

func TestRawMarshalEmpty(t *testing.T) {
	c := New(nil)
	var r Raw
	out, err := c.Marshal(&r)
	if err != nil || out != nil {
		t.Fatalf("empty Raw marshalled to %v, %v; want nil, nil", out, err)
	}
	p := pool.NewPayload(5000)
	r.SetPayload(p.Retain())
	out, err = c.Marshal(&r)
	if err != nil || out != nil {
		t.Fatalf("empty payload marshalled to %v, %v; want nil, nil", out, err)
	}
	if p.Refs() != 2 {
		t.Fatalf("refs %d, want 2: nothing sent, nothing retained", p.Refs())
	}
	r.Release()
	p.Release()
}

func TestRawMisuseCaught(t *testing.T) {
	if !pool.Checked {
		t.Skip("reference checks are on only with -race or -tags invariants")
	}
	// Sending a Raw whose payload reference was already given back must not go unnoticed.
	p := pool.NewPayload(5000)
	*p.Buf() = append(*p.Buf(), seq(5000)...)
	var r Raw
	r.SetPayload(p)
	p.Release() // the Raw's reference, released behind its back
	defer func() {
		if recover() == nil {
			t.Fatal("marshalling a released payload did not panic")
		}
	}()
	New(nil).Marshal(&r)
}
