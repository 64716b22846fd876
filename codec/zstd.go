package codec

import (
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
)

// zstdCompressor is the "zstd" encoding.Compressor. Its pooled encoders and decoders run with
// concurrency 1: they work on the caller's goroutine and start none of their own.
type zstdCompressor struct {
	level     zstd.EncoderLevel
	window    int
	maxWindow uint64
	budget    Budget
	claim     int
	writers   sync.Pool // *zstdWriter
	readers   sync.Pool // *zstdReader
	corrupt   prometheus.Counter
}

func newZstdCompressor(cfg Config) *zstdCompressor {
	return &zstdCompressor{
		level:     zstd.EncoderLevel(cfg.ZstdLevel),
		window:    cfg.ZstdWindow,
		maxWindow: uint64(cfg.ZstdMaxWindow),
		budget:    cfg.Budget,
		claim:     cfg.InflateClaim,
		corrupt:   decompressErrors.WithLabelValues(Zstd),
	}
}

// Name returns "zstd".
func (c *zstdCompressor) Name() string { return Zstd }

type zstdWriter struct {
	e    *zstd.Encoder
	dst  sink
	c    *zstdCompressor
	mode passMode // modeRaw: the message is a pass-through batch, copied (passthrough.go)
}

// Compress returns a writer that compresses one message into w; its Close returns it to the
// pool. Safe for concurrent use.
func (c *zstdCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	zw, _ := c.writers.Get().(*zstdWriter)
	if zw == nil {
		zw = &zstdWriter{c: c}
		e, err := zstd.NewWriter(&zw.dst,
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderLevel(c.level),
			zstd.WithWindowSize(c.window))
		if err != nil {
			return nil, err // Config.Validate admits only valid settings
		}
		zw.e = e
	} else {
		zw.e.Reset(&zw.dst)
	}
	zw.dst.w = w
	return zw, nil
}

func (w *zstdWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		// Nothing to decide on, and nothing to write: a compressor that saw it would start
		// its stream (a frame header), which a message passed through must not carry.
		return 0, nil
	}
	if w.mode.decide(p, zstdFirst); w.mode == modeRaw {
		return w.dst.w.Write(p)
	}
	return w.e.Write(p)
}

// Close ends the frame and returns the writer to the pool; the caller must not use it again.
func (w *zstdWriter) Close() error {
	var err error
	if w.mode != modeRaw {
		err = w.e.Close()
	}
	w.dst.w, w.mode = nil, modeUndecided
	w.c.writers.Put(w)
	return err
}

type zstdReader struct {
	d   *zstd.Decoder
	m   meter
	src source
	c   *zstdCompressor
}

// Decompress returns a reader of the message compressed in r; gRPC calls its Close, which
// returns it to the pool. Safe for concurrent use.
func (c *zstdCompressor) Decompress(r io.Reader) (io.Reader, error) {
	zr, _ := c.readers.Get().(*zstdReader)
	if zr == nil {
		zr = &zstdReader{c: c}
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(c.maxWindow))
		if err != nil {
			return nil, err // Config.Validate admits only valid settings
		}
		zr.d = d
	}
	zr.src.r = r
	zr.m.reset(c.budget, c.claim)
	if err := zr.d.Reset(&zr.src); err != nil {
		c.corrupt.Inc()
		zr.release()
		return nil, err
	}
	return zr, nil
}

func (r *zstdReader) Read(p []byte) (int, error) {
	k, err := r.m.allow(len(p))
	if err != nil {
		return 0, err
	}
	n, err := r.d.Read(p[:k])
	r.m.produced += n
	countCorrupt(r.c.corrupt, err)
	return n, err
}

// Close returns the reader to the pool; gRPC calls it exactly once.
func (r *zstdReader) Close() error {
	r.release()
	return nil
}

func (r *zstdReader) release() {
	r.m.release()
	r.src.r = nil
	r.c.readers.Put(r)
}
