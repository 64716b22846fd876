package httpserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"
	"google.golang.org/grpc/encoding"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
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
	errBusy         = errors.New("httpserver: the intake limiter had no room for the body (-intake.max-bytes)")
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
	// wire holds the body as read from the connection; plain the decompressed body; out the
	// bytes built for admission (valid entries of a partially malformed request, a
	// transcoded JSON body). All are pooled buffers, nil when unused, returned by release.
	wire, plain, out *[]byte
	// hold is the intake limiter's reservation for wire and plain, taken as they grow; adm and
	// done are where it is taken from and what ends a wait for it (set by bind).
	hold admission.Hold
	adm  *admission.Control
	done <-chan struct{}
	// stream reads the connection's body stream and notes that it did (streamed): a refusal
	// after that leaves the body half read.
	stream streamReader
	// probe reads the byte past a full buffer at the limit (a field: a local would escape
	// through the io.Reader call).
	probe [1]byte
	// req is the request as the handler learns it, handed to admission whole (request): its
	// Origin, the tenant (-intake.headers; nil without tenants) and client address, and, when
	// the body arrived compressed, the body as received in Wire and Encoding, kept beside its
	// decompressed form for a pass-through batch; valid until release.
	req pipeline.Request
	// wait is how long the request is told to wait when refused for its rate (-tenant.rate).
	wait time.Duration
	// outLimit is the most out may grow to as a transcoder's output (Grow, json.go).
	outLimit int
	// items is how many items admission took (admit): what a request -ack=upstream then does
	// not deliver is counted with.
	items int
}

// scratchPool keeps scratches through collections (a sync.Pool makes them again after each
// one), one per request in progress.
var scratchPool = pool.NewFreeList[scratch](maxFreeScratches, nil)

const maxFreeScratches = 1024

func getScratch() *scratch { return scratchPool.Get() }

// bind sets where the scratch's buffers take their intake-limiter bytes from.
func (s *scratch) bind(adm *admission.Control, done <-chan struct{}) {
	s.adm, s.done = adm, done
}

// holdsWire reports whether req is all of the scratch's body buffer (s.wire): a body read from
// the stream and admitted as it arrived.
func (s *scratch) holdsWire(req []byte) bool {
	return s.wire != nil && len(req) > 0 && len(*s.wire) == len(req) && &(*s.wire)[0] == &req[0]
}

// request is the request the scratch holds, of signal sig, whose v1 body is body, in f,
// holding items items. A protobuf body that arrived compressed keeps its bytes as received
// (Wire), which may join a batch as they are (compressed pass-through); one that is all of the
// scratch's body buffer offers that buffer (Own), which a batch it opens may take over rather
// than copy, leaving s.wire another one. Anything else (JSON, the good entries of a partly
// malformed request) is copied.
func (s *scratch) request(f format, sig fastpath.Signal, body []byte, items int) pipeline.Request {
	r := pipeline.Request{Signal: sig, Origin: s.req.Origin, Body: body, Items: items}
	switch {
	case f == encProto && s.req.Encoding != pipeline.EncodingNone:
		r.Wire, r.Encoding = s.req.Wire, s.req.Encoding
	case f == encProto && s.holdsWire(body):
		r.Own = s.wire
	}
	return r
}

func (s *scratch) release() {
	if pool.Checked {
		// A batch that took a body buffer over (pipeline.Request.Own) left the scratch another:
		// scribbling over what the scratch returns makes a batch that still shared it
		// deliver garbage in tests, rather than bytes that look right until the buffer's
		// next use.
		scribble(s.wire)
		scribble(s.plain)
		scribble(s.out)
	}
	s.hold.Release()
	pool.PutBytes(s.wire)
	pool.PutBytes(s.plain)
	pool.PutBytes(s.out)
	s.wire, s.plain, s.out = nil, nil, nil
	s.src.Reset(nil)
	s.adm, s.done, s.stream, s.req, s.wait = nil, nil, streamReader{}, pipeline.Request{}, 0
	s.outLimit, s.items = 0, 0
	scratchPool.Put(s)
}

// scribble overwrites all of b's capacity (checked builds, see release).
func scribble(b *[]byte) {
	if b == nil {
		return
	}
	all := (*b)[:cap(*b)]
	for i := range all {
		all[i] = 0xdb
	}
}

// firstGuess is the buffer a decompressed body starts in, relative to its compressed size:
// OTLP compresses about 4 to 10 times, and the buffer doubles (through the pool) when short.
const firstGuess = 8

// firstRead is the most a body's buffer starts with, whatever its Content-Length, so that a
// client that declares a large body and then stalls holds (and takes from the intake limiter)
// about what it sent, not what it declared. Once a client has filled it, its Content-Length is
// believed, up to -http.max-request-bytes: the next buffer is the whole body's, so that the body
// is copied once (firstRead bytes) rather than at every doubling (about its whole size again).
const firstRead = 64 << 10

// Deflate inflates at most about 1032 times its input; zstd, with its run-length blocks, far
// more. A size a body states is believed up to
// these ratios, so that a body that lies about it cannot make a buffer much larger than its
// stream could fill.
const (
	maxGzipRatio = 1032
	maxZstdRatio = 32 << 10
)

// sizeHint is what a compressed body says it inflates to, 0 when it says nothing: a gzip
// member's ISIZE (the last member's, when there are several: an underestimate) or a zstd
// frame's content size, believed up to what the body could inflate to. It only sizes the first
// buffer: the body is read the same way whatever it says, and a lie grows a buffer, or leaves
// one part empty, as a body without a hint would.
func sizeHint(cod coding, body []byte) int {
	switch cod {
	case codingGzip:
		if len(body) < 18 { // 10 bytes of header, 8 of trailer
			return 0
		}
		return min(int(binary.LittleEndian.Uint32(body[len(body)-4:])), maxGzipRatio*len(body))
	case codingZstd:
		var h zstd.Header
		if h.Decode(body) != nil || !h.HasFCS || h.FrameContentSize > math.MaxInt32 {
			return 0
		}
		return min(int(h.FrameContentSize), maxZstdRatio*len(body))
	}
	return 0
}

// decompress inflates body with c into the scratch's pooled buffer, reading at most limit
// bytes of output; hint is the size the body says it inflates to (sizeHint), 0 for none. Every
// buffer it grows into takes its bytes from the intake limiter before any output is written to
// it: errBusy when the limiter had no room within -intake.wait. The result is valid until
// release.
func (s *scratch) decompress(c encoding.Compressor, body []byte, hint, limit int) ([]byte, error) {
	s.src.Reset(body)
	r, err := c.Decompress(&s.src)
	if err != nil {
		return nil, errCorrupt
	}
	if cl, ok := r.(io.Closer); ok {
		defer cl.Close()
	}
	guess := len(body) * firstGuess
	if hint > 0 {
		guess = hint + 1 // room for the end of the stream to show without growing
	}
	out, err := s.readCapped(r, &s.plain, guess, -1, limit)
	if err != nil && err != errBodyTooLarge && err != errBusy {
		return nil, errCorrupt
	}
	return out, err
}

// readBody returns the request body, reading what fasthttp left in its stream into the
// scratch's pooled buffer: cl bytes (the Content-Length), or, for a chunked body (cl < 0),
// until its end, at most limit. Its buffer takes its bytes from the intake limiter as it grows
// (errBusy when it had no room). The result is valid until release.
func (s *scratch) readBody(req *fasthttp.Request, cl, limit int) ([]byte, error) {
	if !req.IsBodyStream() {
		// Set whole (tests that call the handler directly): fasthttp already holds it.
		return req.Body(), nil
	}
	guess := min(cl, firstRead)
	if cl < 0 {
		guess = pool.MinSize
	}
	s.stream.r = req.BodyStream()
	return s.readCapped(&s.stream, &s.wire, guess, cl, limit)
}

// streamReader notes that the body stream was read from. It is the scratch's own field, so
// that passing it as an io.Reader allocates nothing.
type streamReader struct {
	r        io.Reader
	streamed bool
}

func (r *streamReader) Read(p []byte) (int, error) {
	r.streamed = true
	return r.r.Read(p)
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

// grow takes n more bytes from the intake limiter for the scratch's buffers.
func (s *scratch) grow(n int) bool {
	if s.adm == nil {
		return true
	}
	return s.adm.Take(&s.hold, admission.IntakeHTTP, int64(n), s.done)
}

// shrink gives back n bytes of the scratch's buffers to the intake limiter. Without a limiter
// (Config.Limiter nil) grow took nothing, and there is nothing to give back.
func (s *scratch) shrink(n int) {
	if s.adm != nil && s.adm.Limiter() != nil {
		s.hold.Give(int64(n))
	}
}

// getCharged returns an empty pooled buffer of capacity exactly pool.Cap(size), whose bytes
// were taken from the intake limiter first; nil when the limiter refused. (A pooled buffer may
// come with more capacity than its tier promises: it is cut to what was taken.)
func (s *scratch) getCharged(size int) *[]byte {
	c := pool.Cap(size)
	if !s.grow(c) {
		return nil
	}
	b := pool.GetBytes(size)
	*b = (*b)[:0:c]
	return b
}

// putCharged returns a buffer of getCharged to the pool and its bytes to the limiter.
func (s *scratch) putCharged(b *[]byte) {
	c := cap(*b)
	pool.PutBytes(b)
	s.shrink(c)
}

// readCapped reads r to its end, or want bytes of it when want >= 0, into a pooled buffer it
// keeps in *slot (growing it through the pool, never past want or limit), starting with room
// for guess bytes and refusing more than limit. It grows by doubling, or, when want > 0, in one
// step to want. Each buffer's capacity is taken from the intake
// limiter before anything is read into it, and the buffer it replaces given back once copied:
// errBusy when the limiter refused. The bytes are valid until *slot is returned to the pool;
// release gives their reservation back.
func (s *scratch) readCapped(r io.Reader, slot **[]byte, guess, want, limit int) ([]byte, error) {
	ceiling := limit
	switch {
	case want == 0:
		return nil, nil
	case want > 0:
		ceiling = min(limit, want)
	}
	buf := s.getCharged(min(max(guess, pool.MinSize), max(ceiling, 1)))
	if buf == nil {
		return nil, errBusy
	}
	*slot = buf
	for {
		if len(*buf) == want {
			return *buf, nil
		}
		if len(*buf) == min(cap(*buf), ceiling) {
			if len(*buf) >= limit {
				// Full at the limit: one more byte tells a body of exactly limit bytes from a
				// longer one, without a buffer twice the limit.
				n, err := r.Read(s.probe[:])
				switch {
				case n > 0:
					return nil, errBodyTooLarge
				case err == io.EOF:
					return *buf, nil
				case err != nil:
					return nil, errRead
				}
				continue
			}
			next := min(2*cap(*buf), ceiling)
			if want > 0 {
				// A body of known length that filled its first buffer: straight to its
				// length (capped by limit in ceiling), charged before anything is read
				// into it like every buffer.
				next = ceiling
			}
			nb := s.getCharged(next)
			if nb == nil {
				return nil, errBusy
			}
			*nb = append(*nb, *buf...)
			s.putCharged(buf)
			buf = nb
			*slot = buf
		}
		n, err := r.Read((*buf)[len(*buf):min(cap(*buf), ceiling)])
		*buf = (*buf)[:len(*buf)+n]
		switch {
		case err == io.EOF:
			return *buf, nil
		case err != nil:
			return nil, errRead
		}
	}
}
