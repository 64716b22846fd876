package codec

import (
	"bytes"
	"io"
	"testing"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// BenchmarkCompress measures one message through each compressor and back, on Appendix B
// batches, reporting the compressed size as a fraction of the original.
func BenchmarkCompress(b *testing.B) {
	cs := compressors(b)
	for _, sh := range benchShapes {
		enc, _ := otlpgen.New(1).Spans(sh.shape).MarshalVT()
		for _, name := range []string{Gzip, Zstd, Snappy} {
			c := cs[name]
			z := compress(b, c, enc)
			b.Run(sh.name+"/"+name+"/compress", func(b *testing.B) {
				var dst bytes.Buffer
				dst.Grow(len(enc))
				b.ReportAllocs()
				b.SetBytes(int64(len(enc)))
				for b.Loop() {
					dst.Reset()
					w, _ := c.Compress(&dst)
					w.Write(enc)
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(z))/float64(len(enc)), "ratio")
			})
			b.Run(sh.name+"/"+name+"/decompress", func(b *testing.B) {
				src := bytes.NewReader(nil)
				out := make([]byte, len(enc))
				b.ReportAllocs()
				b.SetBytes(int64(len(enc)))
				for b.Loop() {
					src.Reset(z)
					r, err := c.Decompress(src)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(r, out); err != nil {
						b.Fatal(err)
					}
					r.(io.Closer).Close()
				}
			})
		}
	}
}
