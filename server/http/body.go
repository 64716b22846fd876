package httpserver

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/valyala/fasthttp"
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
	errRead         = errors.New("httpserver: cannot read the request body")
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
	// wire holds the body as read from the connection; plain the decompressed body; out the bytes built for admission (valid entries of a
	// partially malformed request, a transcoded JSON body). Both are pooled buffers, nil when
	// unused, returned by release.
	wire, plain, out *[]byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func (s *scratch) release() {
	pool.PutBytes(s.wire)
	pool.PutBytes(s.plain)
	pool.PutBytes(s.out)
	s.wire, s.plain, s.out = nil, nil, nil
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
	out, err := readCapped(r, &s.plain, len(body)*firstGuess, limit)
	if err != nil && err != errBodyTooLarge {
		return nil, errCorrupt
	}
	return out, err
}

// readBody returns the request body, reading what fasthttp left in its stream into the
// scratch's pooled buffer: cl bytes (the Content-Length), or, for a chunked body (cl < 0),
// until its end, at most limit. The result is valid until release.
func (s *scratch) readBody(req *fasthttp.Request, cl, limit int) ([]byte, error) {
	if !req.IsBodyStream() {
		// Set whole (tests that call the handler directly).
		return req.Body(), nil
	}
	guess := cl + 1 // room for the end of the stream to show without growing
	if cl < 0 {
		guess = pool.MinSize
	}
	return readCapped(req.BodyStream(), &s.wire, guess, limit)
}

// discardBody reads the rest of an unread body and drops it, so that the connection can serve
// the next request; false when it could not be read.
func discardBody(req *fasthttp.Request) bool {
	if !req.IsBodyStream() {
		return true
	}
	// A pooled buffer: one on the stack would escape through the io.Reader call.
	buf := pool.GetBytes(4 << 10)
	defer pool.PutBytes(buf)
	b := (*buf)[:cap(*buf)]
	for r := req.BodyStream(); ; {
		_, err := r.Read(b)
		switch {
		case err == io.EOF:
			return true
		case err != nil:
			return false
		}
	}
}

// readCapped reads r to its end into a pooled buffer it keeps in *slot (growing it through
// the pool), starting with room for guess bytes and refusing more than limit. The bytes are
// valid until *slot is returned to the pool.
func readCapped(r io.Reader, slot **[]byte, guess, limit int) ([]byte, error) {
	// One byte more than the limit tells a body of exactly limit bytes from a longer one.
	ceiling := limit + 1
	buf := pool.GetBytes(min(max(guess, pool.MinSize), ceiling))
	*slot = buf
	for {
		if len(*buf) == cap(*buf) {
			if len(*buf) >= ceiling {
				return nil, errBodyTooLarge
			}
			nb := pool.GetBytes(min(2*cap(*buf), ceiling))
			*nb = append(*nb, *buf...)
			pool.PutBytes(buf)
			buf = nb
			*slot = buf
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
			return nil, errRead
		}
	}
}
