//go:build !race && !invariants

package codec

import (
	"bytes"
	"io"
	"testing"

	"google.golang.org/grpc/mem"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/ziptest"
	"github.com/otlpgate/otlpgate/pool"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// Allocation proofs. Checked builds poison released payloads instead of pooling them and the
// race detector makes sync.Pool drop items, so these run in plain builds only. Each function
// goes through the whole life gRPC gives a message: Marshal, the transport's extra reference,
// and the frees.

func assertNoAllocs(t *testing.T, name string, f func()) {
	t.Helper()
	f() // warm the pools
	if got := testing.AllocsPerRun(500, f); got != 0 {
		t.Errorf("%s: %v allocs/op, want 0", name, got)
	}
}

func TestMarshalIntoPoolAllocs(t *testing.T) {
	for _, pl := range []struct {
		name string
		p    mem.BufferPool
	}{{"MemPool", MemPool{}}, {"DefaultBufferPool", nil}} {
		c := New(pl.p)
		for _, sh := range shapes {
			req := otlpgen.New(1).Spans(sh.shape)
			assertNoAllocs(t, pl.name+"/"+sh.name, func() {
				out, err := c.Marshal(req)
				if err != nil {
					panic(err)
				}
				out.Ref()
				out.Free()
				out.Free()
			})
		}
		resp := &otepv1.ExportResponse{Id: 1 << 40, ResultCode: otepv1.ResultCode_FailedRetryable}
		assertNoAllocs(t, pl.name+"/response", func() {
			out, _ := c.Marshal(resp)
			out.Free()
		})
	}
}

// A Raw handed to SendMsg goes through an interface and so lives on the heap; senders keep one
// per stream and reuse it, as these loops do.
func TestRawPassThroughAllocs(t *testing.T) {
	c := New(MemPool{})
	var r Raw
	for _, size := range []int{100, 5000, 250_000} {
		body := seq(size)
		assertNoAllocs(t, "payload", func() {
			p := pool.NewPayload(size)
			*p.Buf() = append(*p.Buf(), body...)
			r.SetPayload(p.Retain())
			out, _ := c.Marshal(&r)
			r.Release()
			out.Ref()
			out.Free()
			out.Free()
			p.Release()
		})
		assertNoAllocs(t, "bytes", func() {
			r.SetBytes(body)
			out, _ := c.Marshal(&r)
			out.Free()
			r.Release()
		})
	}
}

func TestRawReceiveAllocs(t *testing.T) {
	c := New(MemPool{})
	var r Raw
	for _, frame := range []int{1 << 20, 16 << 10} { // one buffer (by reference), frames (copied)
		data := frames(MemPool{}, seq(100_000), frame)
		assertNoAllocs(t, "receive", func() {
			if err := c.Unmarshal(data, &r); err != nil {
				panic(err)
			}
			r.Release()
		})
		data.Free()
	}
}

// Compressing and decompressing draw their state from pools too; gRPC's own buffers around
// them are its business. Two library allocations remain per message and are measured in
// BenchmarkCompress rather than held to zero: s2's framing writer boxes a slice into a
// sync.Pool per 64 KiB chunk, and the zstd encoder's frame header scratch escapes.
func TestCompressorAllocs(t *testing.T) {
	var dst bytes.Buffer
	src := bytes.NewReader(nil)
	for _, sh := range benchShapes {
		enc, _ := otlpgen.New(1).Spans(sh.shape).MarshalVT()
		out := make([]byte, len(enc))
		dst.Grow(2 * len(enc))
		for name, c := range compressors(t) {
			z := compress(t, c, enc)
			if name == Gzip {
				assertNoAllocs(t, sh.name+"/"+name+"/compress", func() {
					dst.Reset()
					w, _ := c.Compress(&dst)
					w.Write(enc)
					w.Close()
				})
			}
			assertNoAllocs(t, sh.name+"/"+name+"/decompress", func() {
				src.Reset(z)
				r, _ := c.Decompress(src)
				if n, _ := io.ReadFull(r, out); n != len(enc) {
					panic("short read")
				}
				r.(io.Closer).Close()
			})
		}
	}
}

// A compressed message through a WireDecompressor and into a Raw allocates nothing but the
// mem.Buffer gRPC boxes the returned slice in (measured beside it: boxing).
func TestWireDecompressorAllocs(t *testing.T) {
	c := New(MemPool{})
	body, _ := otlpgen.New(1).Spans(otlpgen.Shape{Spans: 200, Attrs: 6}).MarshalVT()
	for _, enc := range []string{Gzip, Zstd} {
		d, err := NewWireDecompressor(enc, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		wire := ziptest.Gzip(t, body)
		if enc == Zstd {
			wire = ziptest.Zstd(t, nil, body)
		}
		var r msgReader
		var raw Raw
		var box mem.Buffer
		boxing := testing.AllocsPerRun(100, func() { box = mem.SliceBuffer(wire) })
		_ = box
		f := func() {
			r.reset(wire)
			out, err := d.Do(&r)
			if err != nil {
				panic(err)
			}
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(out)}[:1:1], &raw); err != nil {
				panic(err)
			}
			if w, _ := raw.Wire(); len(w) != len(wire) {
				panic("no wire bytes")
			}
			raw.Release()
		}
		f()
		got := testing.AllocsPerRun(200, f)
		t.Logf("%s: %v allocs/op, boxing %v", enc, got, boxing)
		if got-boxing > 0 {
			t.Errorf("%s: %v allocs/op, %v of them the test's boxing; want none of the codec's", enc, got, boxing)
		}
	}
}
