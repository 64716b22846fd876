package kafkacompress

import (
	"bytes"

	"github.com/pierrec/lz4/v4"
)

// lz4Decoder pairs an lz4 frame reader with its bytes.Reader.
type lz4Decoder struct {
	src bytes.Reader
	zr  *lz4.Reader
}

func (d *Decompressor) getLZ4() *lz4Decoder {
	if l, _ := d.lz4.Get().(*lz4Decoder); l != nil {
		return l
	}
	l := &lz4Decoder{zr: lz4.NewReader(nil)}
	// Concurrency 1 keeps decoding on the caller's goroutine; a concurrent lz4 reader would
	// start goroutines per frame.
	_ = l.zr.Apply(lz4.ConcurrencyOption(1))
	return l
}

func (d *Decompressor) putLZ4(l *lz4Decoder) {
	l.src.Reset(nil)
	l.zr.Reset(nil)
	d.lz4.Put(l)
}

// unlz4 decodes one or more concatenated LZ4 frames (the standard frame format; Kafka's
// pre-0.10 frames with the broken header checksum never carry telemetry).
func (d *Decompressor) unlz4(dst, src []byte) ([]byte, error) {
	l := d.getLZ4()
	defer d.putLZ4(l)
	l.src.Reset(src)
	l.zr.Reset(&l.src)
	return readCapped(dst, l.zr, d.limit)
}
