package feed

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

var inflatedRecords = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_spool_inflated_records_total",
	Help: "Spooled records kept compressed as they arrived that a feeder inflated, because its destination does not send their compression as it is (its -dest changed since they were spooled, or match=resource filters them).",
})

// maxPlain bounds what one record may inflate to: the largest request any intake takes is
// far below it, so a larger length can only come from a damaged record.
const maxPlain = 1 << 30

var errPlainLength = errors.New("feed: a compressed record does not inflate to the length it was spooled with")

// inflater inflates compressed records; its readers are made at first use and reused. It
// belongs to one feeder's goroutine.
type inflater struct {
	src bytes.Reader
	gz  *gzip.Reader
	zd  *zstd.Decoder
}

// inflate fills out with the plain bytes of wire, compressed in enc, which must be exactly
// len(out) bytes long.
func (in *inflater) inflate(enc pipeline.Encoding, wire, out []byte) error {
	in.src.Reset(wire)
	defer in.src.Reset(nil) // hold no reference to the caller's bytes
	var r io.Reader
	switch enc {
	case pipeline.EncodingGzip:
		if in.gz == nil {
			in.gz = new(gzip.Reader)
		}
		if err := in.gz.Reset(&in.src); err != nil {
			return err
		}
		r = in.gz // concatenated members read as one stream
	case pipeline.EncodingZstd:
		if in.zd == nil {
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxPlain))
			if err != nil {
				return err
			}
			in.zd = d
		}
		if err := in.zd.Reset(&in.src); err != nil {
			return err
		}
		r = in.zd // skippable frames (the preamble of each record) are passed over
	default:
		return fmt.Errorf("feed: a spooled record in an unknown encoding (%d)", enc)
	}
	if _, err := io.ReadFull(r, out); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = errPlainLength
		}
		return err
	}
	var one [1]byte
	if n, err := r.Read(one[:]); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = errPlainLength
		}
		return err
	}
	return nil
}

// close releases the zstd decoder's resources.
func (in *inflater) close() {
	if in.zd != nil {
		in.zd.Close()
		in.zd = nil
	}
}
