package codec

import (
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
)

// snappyCompressor is the "snappy" encoding.Compressor: the snappy framing format
// (stream identifier, then checksummed chunks of at most 64 KiB), which is what other gRPC
// implementations send under that name. Pooled writers and readers; writers encode on the
// caller's goroutine.
type snappyCompressor struct {
	budget  Budget
	claim   int
	writers sync.Pool // *snappyWriter
	readers sync.Pool // *snappyReader
	corrupt prometheus.Counter
}

func newSnappyCompressor(b Budget, claim int) *snappyCompressor {
	return &snappyCompressor{budget: b, claim: claim, corrupt: decompressErrors.WithLabelValues(Snappy)}
}

// Name returns "snappy".
func (c *snappyCompressor) Name() string { return Snappy }

type snappyWriter struct {
	w   *s2.Writer
	dst sink
	c   *snappyCompressor
}

// Compress returns a writer that compresses one message into w; its Close returns it to the
// pool. Safe for concurrent use.
func (c *snappyCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	sw, _ := c.writers.Get().(*snappyWriter)
	if sw == nil {
		sw = &snappyWriter{c: c}
		// Snappy-compatible output, block encoding synchronous with Write and Close.
		sw.w = s2.NewWriter(&sw.dst, s2.WriterSnappyCompat(), s2.WriterConcurrency(1))
	} else {
		sw.w.Reset(&sw.dst)
	}
	sw.dst.w = w
	return sw, nil
}

func (w *snappyWriter) Write(p []byte) (int, error) { return w.w.Write(p) }

// Close flushes the last chunk and returns the writer to the pool; the caller must not use it
// again.
func (w *snappyWriter) Close() error {
	err := w.w.Close()
	w.dst.w = nil
	w.c.writers.Put(w)
	return err
}

type snappyReader struct {
	r   *snappy.Reader
	m   meter
	src source
	c   *snappyCompressor
}

// Decompress returns a reader of the message compressed in r; gRPC calls its Close, which
// returns it to the pool. Safe for concurrent use.
func (c *snappyCompressor) Decompress(r io.Reader) (io.Reader, error) {
	sr, _ := c.readers.Get().(*snappyReader)
	if sr == nil {
		sr = &snappyReader{c: c}
		sr.r = snappy.NewReader(&sr.src)
	} else {
		sr.r.Reset(&sr.src)
	}
	sr.src.r = r
	sr.m.reset(c.budget, c.claim)
	return sr, nil
}

func (r *snappyReader) Read(p []byte) (int, error) {
	k, err := r.m.allow(len(p))
	if err != nil {
		return 0, err
	}
	n, err := r.r.Read(p[:k])
	r.m.produced += n
	countCorrupt(r.c.corrupt, err)
	return n, err
}

// Close returns the reader to the pool; gRPC calls it exactly once.
func (r *snappyReader) Close() error {
	r.m.release()
	r.src.r = nil
	r.c.readers.Put(r)
	return nil
}
