package client

import (
	"strconv"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// BenchmarkFrame compares the two ways of building an OTEP request from a shared payload: views
// of the payload between header buffers (no copy of the body) and one copy with
// fastpath.AppendOTEP, then reading the result once as gRPC's transport does. The entry size at
// which views start to pay decides viewMinEntry.
func BenchmarkFrame(b *testing.B) {
	for _, entry := range []int{64, 256, 1024, 8192} {
		entries := max(1, (512<<10)/entry)
		body := traceBody("f", entries, entry-60)
		p := payloadOf(body, len(body))
		sink := make([]byte, fastpath.OTEPSize(1<<20, body))
		name := "entry=" + strconv.Itoa(len(body)/entries) + "B"
		b.Run(name+"/views", func(b *testing.B) {
			benchFrame(b, p, false, sink)
		})
		b.Run(name+"/copy", func(b *testing.B) {
			benchFrame(b, p, true, sink)
		})
		p.Release()
	}
}

func benchFrame(b *testing.B, p *pool.Payload, copy bool, sink []byte) {
	c := newFrameCodec()
	b.SetBytes(int64(p.Len()))
	b.ReportAllocs()
	for i := range b.N {
		f, err := newFrame(uint64(i+1), p)
		if err != nil {
			b.Fatal(err)
		}
		f.copy = copy // force the path, whatever the threshold would choose
		bufs, _ := c.Marshal(f)
		f.unref()
		bufs.CopyTo(sink) // the transport reads every byte once, either way
		bufs.Free()
	}
}
