// Package ziptest compresses test bytes as clients do: a gzip member as the standard library
// writes it, a zstd frame as klauspost's encoder writes it. It imports no otlpgate package, so
// that the tests of codec, which internal/testkit imports through fastpath, can use it too.
package ziptest

import (
	"bytes"
	"compress/gzip"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// gzipWriters keeps the writers Gzip used: a writer's state is over half a megabyte, made and
// zeroed anew for each member, and a test that compresses thousands of requests (more so in
// internal/zeroalloc, whose binary records every allocation) spent seconds on it. Reset gives a
// writer the state NewWriter gives, so the member is the same.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// Gzip returns b as one gzip member.
func Gzip(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzipWriters.Get().(*gzip.Writer)
	w.Reset(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Reset(nil)
	gzipWriters.Put(w)
	return buf.Bytes()
}

// Zstd returns b as one zstd frame appended to a copy of prefix (nil, or pipeline.ZstdPreamble
// for a message otlpgate's zstd writer sends as it is).
func Zstd(t testing.TB, prefix, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, append([]byte(nil), prefix...))
}
