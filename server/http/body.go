package httpserver

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/encoding"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/pool"
)

// coding is a Content-Encoding the intake accepts.
type coding uint8

const (
	codingIdentity coding = iota
	codingGzip
	codingZstd
	codingUnknown
)

// parseCoding reads a Content-Encoding header value. Only a single coding is accepted:
// exporters compress once, and a chain would multiply the decompression work one request can
// ask for.
func parseCoding(v []byte) coding {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0, asciiEqualFold(v, "identity"):
		return codingIdentity
	case asciiEqualFold(v, codec.Gzip), asciiEqualFold(v, "x-gzip"):
		return codingGzip
	case asciiEqualFold(v, codec.Zstd):
		return codingZstd
	}
	return codingUnknown
}

// asciiEqualFold compares b with the lower-case ASCII string s, ignoring the case of b.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

var (
	errBodyTooLarge = errors.New("httpserver: decompressed body exceeds -http.max-request-bytes")
	errCorrupt      = errors.New("httpserver: corrupt compressed body")
)

// decoders are the pooled decompressors of codec/, the same the gRPC intake uses.
type decoders struct {
	gzip, zstd encoding.Compressor
}

func newDecoders() (decoders, error) {
	cs, err := codec.Compressors(codec.DefaultConfig())
	if err != nil {
		return decoders{}, err
	}
	var d decoders
	for _, c := range cs {
		switch c.Name() {
		case codec.Gzip:
			d.gzip = c
		case codec.Zstd:
			d.zstd = c
		}
	}
	if d.gzip == nil || d.zstd == nil {
		return decoders{}, errors.New("httpserver: codec lacks gzip or zstd")
	}
	return d, nil
}

// scratch is the per-request state of the handler, pooled.
type scratch struct {
	src bytes.Reader
	// plain holds the decompressed body; out the bytes built for admission (valid entries of a
	// partially malformed request, a transcoded JSON body). Both are pooled buffers, nil when
	// unused, returned by release.
	plain, out *[]byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func (s *scratch) release() {
	pool.PutBytes(s.plain)
	pool.PutBytes(s.out)
	s.plain, s.out = nil, nil
	s.src.Reset(nil)
	scratchPool.Put(s)
}

// firstGuess is the buffer a decompressed body starts in, relative to its compressed size:
// OTLP compresses about 4 to 10 times, and the buffer doubles (through the pool) when short.
const firstGuess = 8

// decompress inflates body with c into the scratch's pooled buffer, reading at most limit
// bytes of output. The result is valid until release.
func (s *scratch) decompress(c encoding.Compressor, body []byte, limit int) ([]byte, error) {
	s.src.Reset(body)
	r, err := c.Decompress(&s.src)
	if err != nil {
		return nil, errCorrupt
	}
	if cl, ok := r.(io.Closer); ok {
		defer cl.Close()
	}
	// One byte more than the limit tells a body of exactly limit bytes from a longer one.
	ceiling := limit + 1
	buf := pool.GetBytes(min(max(len(body)*firstGuess, pool.MinSize), ceiling))
	s.plain = buf
	for {
		if len(*buf) == cap(*buf) {
			if len(*buf) >= ceiling {
				return nil, errBodyTooLarge
			}
			nb := pool.GetBytes(min(2*cap(*buf), ceiling))
			*nb = append(*nb, *buf...)
			pool.PutBytes(buf)
			buf = nb
			s.plain = buf
		}
		n, err := r.Read((*buf)[len(*buf):min(cap(*buf), ceiling)])
		*buf = (*buf)[:len(*buf)+n]
		if len(*buf) > limit {
			return nil, errBodyTooLarge
		}
		switch {
		case err == io.EOF:
			return *buf, nil
		case err != nil:
			return nil, errCorrupt
		}
	}
}
