package testkit

import (
	"bytes"
	"compress/gzip"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Gzip returns b as one gzip member, as the standard library writes it.
func Gzip(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Zstd returns b as one zstd frame appended to prefix (nil, or fastpath.ZstdPreamble for a
// message otlpgate's zstd writer sends as it is).
func Zstd(t testing.TB, prefix, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, append([]byte(nil), prefix...))
}

// WireDest is a destination that sends compressed pass-through batches of Enc
// (fastpath.WireEncoder): it notes each batch's encoding and hands the batch to the Recorder.
type WireDest struct {
	*Recorder
	Enc  fastpath.Encoding
	mu   sync.Mutex
	encs []fastpath.Encoding
}

// PassThrough implements fastpath.WireEncoder.
func (d *WireDest) PassThrough() fastpath.Encoding { return d.Enc }

// Enqueue notes b's encoding and records b.
func (d *WireDest) Enqueue(b *fastpath.Batch) error {
	d.mu.Lock()
	d.encs = append(d.encs, b.Encoding)
	d.mu.Unlock()
	return d.Recorder.Enqueue(b)
}

// Encodings returns the encodings of the batches enqueued so far, in order.
func (d *WireDest) Encodings() []fastpath.Encoding {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]fastpath.Encoding(nil), d.encs...)
}
