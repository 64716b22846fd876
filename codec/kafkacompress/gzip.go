package kafkacompress

import (
	"bytes"

	"github.com/klauspost/compress/gzip"
)

// gzipDecoder pairs a gzip reader with the bytes.Reader it reads from, so that neither is
// allocated per call.
type gzipDecoder struct {
	src   bytes.Reader
	zr    gzip.Reader
	probe [1]byte
}

func (d *Decompressor) getGzip() *gzipDecoder {
	if g, _ := d.gzip.Get().(*gzipDecoder); g != nil {
		return g
	}
	return new(gzipDecoder)
}

func (d *Decompressor) putGzip(g *gzipDecoder) {
	// Drop the reference to the caller's input so the pool does not pin it.
	g.src.Reset(nil)
	d.gzip.Put(g)
}

// gunzip decodes one or more concatenated gzip members (Kafka clients write one).
func (d *Decompressor) gunzip(dst, src []byte) ([]byte, error) {
	g := d.getGzip()
	defer d.putGzip(g)
	g.src.Reset(src)
	if err := g.zr.Reset(&g.src); err != nil {
		return dst, ErrCorrupt
	}
	g.zr.Multistream(true)
	return readCapped(dst, &g.zr, d.limit, g.probe[:])
}
