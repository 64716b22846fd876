package codec

import (
	"bufio"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
)

// gzipCompressor is the "gzip" encoding.Compressor, with pooled writers and readers.
type gzipCompressor struct {
	level   int
	budget  Budget
	claim   int
	writers sync.Pool // *gzipWriter
	readers sync.Pool // *gzipReader
	corrupt prometheus.Counter
}

func newGzipCompressor(level int, b Budget, claim int) *gzipCompressor {
	return &gzipCompressor{level: level, budget: b, claim: claim, corrupt: decompressErrors.WithLabelValues(Gzip)}
}

// Name returns "gzip".
func (c *gzipCompressor) Name() string { return Gzip }

type gzipWriter struct {
	z    *gzip.Writer
	dst  sink
	c    *gzipCompressor
	mode passMode // modeRaw: the message is a pass-through batch, copied (passthrough.go)
}

// Compress returns a writer that compresses one message into w; its Close returns it to the
// pool. Safe for concurrent use.
func (c *gzipCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	gw, _ := c.writers.Get().(*gzipWriter)
	if gw == nil {
		gw = &gzipWriter{c: c}
		z, err := gzip.NewWriterLevel(&gw.dst, c.level)
		if err != nil {
			return nil, err // Config.Validate admits only valid levels
		}
		gw.z = z
	} else {
		gw.z.Reset(&gw.dst)
	}
	gw.dst.w = w
	return gw, nil
}

func (w *gzipWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		// Nothing to decide on, and nothing to write: a compressor that saw it would start
		// its stream (gzip writes its header), which a message passed through must not carry.
		return 0, nil
	}
	if w.mode.decide(p, gzipFirst); w.mode == modeRaw {
		return w.dst.w.Write(p)
	}
	return w.z.Write(p)
}

// Close ends the gzip member and returns the writer to the pool; the caller must not use it
// again.
func (w *gzipWriter) Close() error {
	var err error
	if w.mode != modeRaw {
		err = w.z.Close()
	}
	w.dst.w, w.mode = nil, modeUndecided
	w.c.writers.Put(w)
	return err
}

type gzipReader struct {
	z   gzip.Reader
	m   meter
	br  *bufio.Reader // flate reads bytes one at a time; it has a fast path for *bufio.Reader
	src source
	c   *gzipCompressor
}

// Decompress returns a reader of the message compressed in r; gRPC calls its Close, which
// returns it to the pool. Safe for concurrent use.
func (c *gzipCompressor) Decompress(r io.Reader) (io.Reader, error) {
	gr, _ := c.readers.Get().(*gzipReader)
	if gr == nil {
		gr = &gzipReader{c: c}
		gr.br = bufio.NewReader(&gr.src)
	}
	gr.src.r = r
	gr.m.reset(c.budget, c.claim)
	gr.br.Reset(&gr.src)
	if err := gr.z.Reset(gr.br); err != nil {
		c.corrupt.Inc()
		gr.release()
		return nil, err
	}
	return gr, nil
}

func (r *gzipReader) Read(p []byte) (int, error) {
	k, err := r.m.allow(len(p))
	if err != nil {
		return 0, err
	}
	n, err := r.z.Read(p[:k])
	r.m.produced += n
	countCorrupt(r.c.corrupt, err)
	return n, err
}

// Close returns the reader to the pool; gRPC calls it exactly once.
func (r *gzipReader) Close() error {
	r.release()
	return nil
}

func (r *gzipReader) release() {
	r.m.release()
	r.src.r = nil
	r.br.Reset(&r.src) // drop bytes read ahead of the message's end
	r.c.readers.Put(r)
}
