package codec

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/pool"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// Appendix B batches: small is 100 spans with 4 attributes, large 500 spans with 10.
var benchShapes = []struct {
	name  string
	shape otlpgen.Shape
}{
	{"small", otlpgen.Small},
	{"large", otlpgen.Large},
}

// grpcDefault is grpc-go's own proto codec, the baseline every gRPC server runs with.
func grpcDefault() encoding.CodecV2 { return encoding.GetCodecV2(grpcproto.Name) }

func BenchmarkMarshal(b *testing.B) {
	for _, sh := range benchShapes {
		req := otlpgen.New(1).Spans(sh.shape)
		size := int64(req.SizeVT())
		codecs := []struct {
			name string
			c    encoding.CodecV2
		}{
			{"vtproto-mempool", New(MemPool{})},
			{"vtproto-defaultpool", New(nil)},
			{"grpc-proto-codec", grpcDefault()},
		}
		for _, cc := range codecs {
			b.Run(sh.name+"/"+cc.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(size)
				for b.Loop() {
					out, err := cc.c.Marshal(req)
					if err != nil {
						b.Fatal(err)
					}
					out.Free()
				}
			})
		}
		b.Run(sh.name+"/protobuf", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(size)
			for b.Loop() {
				if _, err := proto.Marshal(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for _, sh := range benchShapes {
		enc, _ := otlpgen.New(1).Spans(sh.shape).MarshalVT()
		one := mem.BufferSlice{mem.NewBuffer(&enc, nil)}
		framed := frames(MemPool{}, enc, 16<<10)
		b.Cleanup(framed.Free)
		c := New(MemPool{})

		b.Run(sh.name+"/vtproto-pooled-msg", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				m := coltracev1.ExportTraceServiceRequestFromVTPool()
				if err := c.Unmarshal(one, m); err != nil {
					b.Fatal(err)
				}
				m.ReturnToVTPool()
			}
		})
		b.Run(sh.name+"/vtproto-pooled-msg-16KiB-frames", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				m := coltracev1.ExportTraceServiceRequestFromVTPool()
				if err := c.Unmarshal(framed, m); err != nil {
					b.Fatal(err)
				}
				m.ReturnToVTPool()
			}
		})
		b.Run(sh.name+"/grpc-proto-codec", func(b *testing.B) {
			g := grpcDefault()
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if err := g.Unmarshal(one, &coltracev1.ExportTraceServiceRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sh.name+"/protobuf", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if err := proto.Unmarshal(enc, &coltracev1.ExportTraceServiceRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawPassThrough is the proxy path: a payload handed to gRPC and given back, and a
// received message kept as bytes (by reference in one buffer, or copied out of 16 KiB frames).
func BenchmarkRawPassThrough(b *testing.B) {
	for _, sh := range benchShapes {
		enc, _ := otlpgen.New(1).Spans(sh.shape).MarshalVT()
		c := New(MemPool{})
		b.Run(sh.name+"/send-payload", func(b *testing.B) {
			p := pool.NewPayload(len(enc))
			*p.Buf() = append(*p.Buf(), enc...)
			defer p.Release()
			var r Raw
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				r.SetPayload(p.Retain())
				out, _ := c.Marshal(&r)
				r.Release()
				out.Ref() // the transport's reference
				out.Free()
				out.Free()
			}
		})
		for _, frame := range []struct {
			name string
			size int
		}{{"receive-one-buffer", len(enc)}, {"receive-16KiB-frames", 16 << 10}} {
			data := frames(MemPool{}, enc, frame.size)
			b.Cleanup(data.Free)
			b.Run(sh.name+"/"+frame.name, func(b *testing.B) {
				var r Raw
				b.ReportAllocs()
				b.SetBytes(int64(len(enc)))
				for b.Loop() {
					if err := c.Unmarshal(data, &r); err != nil {
						b.Fatal(err)
					}
					r.Release()
				}
			})
		}
	}
}

// BenchmarkExportLoopback sends whole requests over a real loopback gRPC connection: the typed
// path with this codec against grpc-go's default, and the raw proxy path.
func BenchmarkExportLoopback(b *testing.B) {
	for _, sh := range benchShapes {
		req := otlpgen.New(1).Spans(sh.shape)
		enc, _ := req.MarshalVT()
		b.Run(sh.name+"/typed-otlpgate-codec", func(b *testing.B) {
			h := start(b)
			client := coltracev1.NewTraceServiceClient(h.conn)
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := client.Export(b.Context(), req); err != nil {
					b.Fatal(err)
				}
				h.traces.reset()
			}
		})
		b.Run(sh.name+"/typed-grpc-default-codec", func(b *testing.B) {
			h := start(b, grpc.ForceServerCodecV2(grpcDefault()))
			client := coltracev1.NewTraceServiceClient(h.conn)
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := client.Export(b.Context(), req, grpc.ForceCodecV2(grpcDefault())); err != nil {
					b.Fatal(err)
				}
				h.traces.reset()
			}
		})
		b.Run(sh.name+"/raw-payload", func(b *testing.B) {
			h := start(b)
			p := pool.NewPayload(len(enc))
			*p.Buf() = append(*p.Buf(), enc...)
			defer p.Release()
			var r Raw
			var resp coltracev1.ExportTraceServiceResponse
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				r.SetPayload(p.Retain())
				if err := h.conn.Invoke(b.Context(), coltracev1.TraceService_Export_FullMethodName, &r, &resp); err != nil {
					b.Fatal(err)
				}
				r.Release()
				h.traces.reset()
			}
		})
	}
}
