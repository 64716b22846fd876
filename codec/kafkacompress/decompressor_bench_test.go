package kafkacompress

import "testing"

func BenchmarkDecompress(b *testing.B) {
	d := mustNew(b, 1<<20)
	for _, c := range loadCaptures(b) {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]byte, 0, 1<<20)
			b.ReportAllocs()
			b.SetBytes(int64(len(c.want)))
			for b.Loop() {
				if _, err := d.Decompress(dst, c.codec, c.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecompressLarge decodes 512 KiB payloads, closer to the default limit.
func BenchmarkDecompressLarge(b *testing.B) {
	d := mustNew(b, 1<<20)
	raw := payload(512<<10, 3)
	for _, c := range []struct {
		name  string
		codec Codec
		in    []byte
	}{
		{"gzip", Gzip, gzipOf(b, raw)},
		{"snappy", Snappy, xerialOf(raw, 32<<10)},
		{"lz4", LZ4, lz4Of(b, raw)},
		{"zstd", Zstd, zstdOf(b, raw)},
	} {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]byte, 0, 1<<20)
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := d.Decompress(dst, c.codec, c.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
