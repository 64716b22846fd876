package spool

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
)

// Segment layout. A segment starts with a header:
//
//	magic   [4]byte  "OGSP"
//	version uint32   little endian, segmentVersion
//	seq     uint64   the segment's sequence number, as in its file name
//
// followed by records, each framed as:
//
//	crc     uint32   CRC32C (Castagnoli) of the 12 bytes after it and the payload
//	length  uint32   payload length
//	items   uint32   spans, data points or log records in the payload
//	signal  uint8    the payload's signal, as the caller numbers them
//	zero    [3]byte  must be zero
//	payload [length]byte
//
// Records are not aligned and carry no sync marker: a reader that meets a bad frame finds the
// next good one by trying every later offset, which the zero bytes, the length bound and the
// CRC make cheap to reject. The CRC covers the length, so a bit flip in a length is caught
// before the reader trusts it to skip.
const (
	segmentMagic   = "OGSP"
	segmentVersion = 1
	headerSize     = 16
	frameSize      = 16

	// MaxRecordBytes caps one record's payload: larger appends fail with ErrTooLarge, and a
	// length above it marks a frame as corrupt.
	MaxRecordBytes = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	errBadFrame  = errors.New("spool: bad record frame")
	errShortRead = errors.New("spool: record past end of segment")
)

// frame is a decoded record header.
type frame struct {
	length uint32
	items  uint32
	signal uint8
}

// appendSegmentHeader appends the header of segment seq to dst.
func appendSegmentHeader(dst []byte, seq uint64) []byte {
	dst = append(dst, segmentMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, segmentVersion)
	return binary.LittleEndian.AppendUint64(dst, seq)
}

// Header checks, as readSegmentHeader reports them.
var (
	errHeaderShort   = errors.New("spool: segment header truncated")
	errHeaderMagic   = errors.New("spool: not a segment (bad magic)")
	errHeaderVersion = errors.New("spool: segment version unknown (written by a newer otlpgate?)")
	errHeaderSeq     = errors.New("spool: segment header names another sequence number")
)

// checkSegmentHeader validates the header of the segment named seq.
func checkSegmentHeader(h []byte, seq uint64) error {
	if len(h) < headerSize {
		return errHeaderShort
	}
	if string(h[:4]) != segmentMagic {
		return errHeaderMagic
	}
	if binary.LittleEndian.Uint32(h[4:]) != segmentVersion {
		return errHeaderVersion
	}
	if binary.LittleEndian.Uint64(h[8:]) != seq {
		return errHeaderSeq
	}
	return nil
}

// appendFrame appends a framed record to dst.
func appendFrame(dst []byte, signal uint8, items uint32, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, items)
	dst = append(dst, signal, 0, 0, 0)
	dst = append(dst, payload...)
	crc := crc32.Update(0, castagnoli, dst[start+4:])
	binary.LittleEndian.PutUint32(dst[start:], crc)
	return dst
}

// parseFrameHeader decodes a frame header and checks what can be checked without the payload;
// room is how many payload bytes the segment has after the header.
func parseFrameHeader(h []byte, room int64) (frame, uint32, bool) {
	crc := binary.LittleEndian.Uint32(h)
	f := frame{
		length: binary.LittleEndian.Uint32(h[4:]),
		items:  binary.LittleEndian.Uint32(h[8:]),
		signal: h[12],
	}
	if h[13] != 0 || h[14] != 0 || h[15] != 0 || f.length > MaxRecordBytes || int64(f.length) > room {
		return frame{}, 0, false
	}
	return f, crc, true
}

// frameCRC is the checksum a frame with header h and payload p must carry.
func frameCRC(h, p []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, h[4:frameSize]), castagnoli, p)
}

// readFrame reads and verifies the record at off, which must end by end. The payload is
// appended to *buf, replacing *buf by a larger pooled buffer when it is too small. On error
// *buf is left at its length on entry.
func readFrame(f io.ReaderAt, off, end int64, buf *[]byte) (frame, error) {
	var h [frameSize]byte
	if end-off < frameSize {
		return frame{}, errShortRead
	}
	if _, err := f.ReadAt(h[:], off); err != nil {
		return frame{}, err
	}
	fr, crc, ok := parseFrameHeader(h[:], end-off-frameSize)
	if !ok {
		return frame{}, errBadFrame
	}
	start := len(*buf)
	growBuf(buf, int(fr.length))
	p := (*buf)[start : start+int(fr.length)]
	if _, err := f.ReadAt(p, off+frameSize); err != nil && !(err == io.EOF && fr.length == 0) {
		*buf = (*buf)[:start]
		return frame{}, err
	}
	if frameCRC(h[:], p) != crc {
		*buf = (*buf)[:start]
		return frame{}, errBadFrame
	}
	return fr, nil
}
