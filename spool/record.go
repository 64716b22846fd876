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
//	flags   uint8    0, or flagMeta (version 2 segments) and flagEncoded (version 3)
//	zero    [2]byte  must be zero
//	payload [length]byte
//
// The payload's last bytes may carry what the caller said of the record besides its bytes, in
// this order after the bytes themselves:
//
//	bytes    the record as appended
//	plain    uint32   with flagEncoded: bytes is compressed, plain is its inflated length
//	encoding uint8    with flagEncoded: how bytes is compressed, as the caller numbers it (not 0)
//	meta     []byte   with flagMeta: the record's meta (the tenant of the request)
//	metaLen  uint16   with flagMeta: len(meta), little endian, not 0
//
// All of it sits after the bytes so that a reader that appended the whole record to a batch
// cuts it off the end without moving them.
//
// Records are not aligned and carry no sync marker: a reader that meets a bad frame finds the
// next good one by trying every later offset, which the zero bytes, the length bound and the
// CRC make cheap to reject. The CRC covers the length, so a bit flip in a length is caught
// before the reader trusts it to skip.
const (
	segmentMagic = "OGSP"
	// segmentVersion is the version of segments written without meta, which every otlpgate
	// reads; segmentVersionMeta is written by a spool whose records may carry meta
	// (Config.Meta), and segmentVersionEncoded by one that appended a compressed record
	// (Config.Encoded, Record.Encoding), so that an older otlpgate sets such a segment aside as written by a
	// newer one instead of skipping its records as corrupt. All three are read.
	segmentVersion        = 1
	segmentVersionMeta    = 2
	segmentVersionEncoded = 3
	headerSize            = 16
	frameSize             = 16

	// flagMeta marks a record whose payload ends with meta.
	flagMeta = 1
	// flagEncoded marks a record whose bytes are compressed: the plain length and the
	// encoding follow them.
	flagEncoded = 2
	// encodedSize is what flagEncoded adds after the bytes.
	encodedSize = 5
	// MaxMetaBytes caps a record's meta.
	MaxMetaBytes = 4 << 10
	// maxExtra is the most a record's frame adds to its bytes besides the header.
	maxExtra = encodedSize + MaxMetaBytes + 2

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
	length uint32 // payload bytes, meta included
	items  uint32
	signal uint8
	flags  uint8
}

// trailer is what follows a record's bytes in its payload.
type trailer struct {
	size     int    // bytes after the record's bytes: the encoding and the meta
	meta     []byte // nil when none
	encoding uint8  // 0: the bytes are plain
	plain    uint32 // with encoding: the inflated length of the bytes
}

// trailer reads what follows the record's bytes at the end of body, the payload of frame fr, and
// reports whether it fits in body and is well formed.
func (fr frame) trailer(body []byte) (trailer, bool) {
	var t trailer
	end := len(body)
	if fr.flags&flagMeta != 0 {
		if end < 2 {
			return t, false
		}
		n := int(binary.LittleEndian.Uint16(body[end-2:]))
		if n == 0 || n > MaxMetaBytes || n+2 > end { // Append writes no empty meta
			return t, false
		}
		t.meta = body[end-2-n : end-2]
		end -= n + 2
	}
	if fr.flags&flagEncoded != 0 {
		if end < encodedSize || body[end-1] == 0 {
			return t, false
		}
		t.encoding = body[end-1]
		t.plain = binary.LittleEndian.Uint32(body[end-encodedSize:])
		end -= encodedSize
	}
	t.size = len(body) - end
	return t, true
}

// appendSegmentHeader appends the header of segment seq to dst, of version segmentVersion.
func appendSegmentHeader(dst []byte, seq uint64) []byte {
	return appendSegmentHeaderVersion(dst, seq, segmentVersion)
}

func appendSegmentHeaderVersion(dst []byte, seq uint64, version uint32) []byte {
	dst = append(dst, segmentMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, version)
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
	if v := binary.LittleEndian.Uint32(h[4:]); v < segmentVersion || v > segmentVersionEncoded {
		return errHeaderVersion
	}
	if binary.LittleEndian.Uint64(h[8:]) != seq {
		return errHeaderSeq
	}
	return nil
}

// appendFrame appends a framed record without meta to dst.
func appendFrame(dst []byte, signal uint8, items uint32, payload []byte) []byte {
	return appendRecordFrame(dst, signal, items, nil, 0, 0, nil, payload)
}

// frameLen is the size of the frame of a record of size bytes with this meta and encoding.
func frameLen(size int, meta []byte, enc uint8) int64 {
	n := int64(frameSize + size)
	if enc != 0 {
		n += encodedSize
	}
	if len(meta) > 0 {
		n += int64(len(meta)) + 2
	}
	return n
}

// appendMetaFrame appends a framed record of plain bytes to dst; meta, when not empty, follows
// the payload.
func appendMetaFrame(dst []byte, signal uint8, items uint32, meta, payload []byte) []byte {
	return appendRecordFrame(dst, signal, items, meta, 0, 0, nil, payload)
}

// appendRecordFrame appends a framed record to dst: prefix and payload, the record's bytes,
// then, when enc is not 0, plain and enc (the bytes are compressed), then meta when not empty.
func appendRecordFrame(dst []byte, signal uint8, items uint32, meta []byte, enc uint8, plain uint32, prefix, payload []byte) []byte {
	start := len(dst)
	var flags uint8
	length := len(prefix) + len(payload)
	if enc != 0 {
		flags |= flagEncoded
		length += encodedSize
	}
	if len(meta) > 0 {
		flags |= flagMeta
		length += len(meta) + 2
	}
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(length))
	dst = binary.LittleEndian.AppendUint32(dst, items)
	dst = append(dst, signal, flags, 0, 0)
	dst = append(dst, prefix...)
	dst = append(dst, payload...)
	if enc != 0 {
		dst = binary.LittleEndian.AppendUint32(dst, plain)
		dst = append(dst, enc)
	}
	if len(meta) > 0 {
		dst = append(dst, meta...)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(meta)))
	}
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
		flags:  h[13],
	}
	if h[13]&^(flagMeta|flagEncoded) != 0 || h[14] != 0 || h[15] != 0 || f.length > MaxRecordBytes+maxExtra || int64(f.length) > room {
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
	if _, ok := fr.trailer(p); !ok {
		*buf = (*buf)[:start]
		return frame{}, errBadFrame
	}
	return fr, nil
}
