package h2

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/net/http2"
)

// HeaderField is a field to encode.
type HeaderField struct {
	Name, Value string
}

// AppendHeaderBlock appends an HPACK block (RFC 7541) of fields that leaves the dynamic tables
// of both ends alone: a field the static table holds whole is its index; any other is a literal
// without indexing, naming the static table's entry for its name when there is one, each string
// Huffman-coded when that is shorter. Such a block decodes the same on any connection at any
// point, whatever the peer's table holds, so it is built once and sent many times. Names must
// be lower case (RFC 9113 §8.2.1).
func AppendHeaderBlock(dst []byte, fields ...HeaderField) []byte {
	for _, f := range fields {
		nameIdx := 0
		for i := 1; i <= staticLen; i++ {
			if staticTable[i].name != f.Name {
				continue
			}
			if staticTable[i].value == f.Value {
				nameIdx = -i
				break
			}
			if nameIdx == 0 {
				nameIdx = i
			}
		}
		if nameIdx < 0 {
			dst = appendInt(dst, 7, 0x80, uint64(-nameIdx)) // indexed field, §6.1
			continue
		}
		dst = appendInt(dst, 4, 0x00, uint64(nameIdx)) // literal without indexing, §6.2.2
		if nameIdx == 0 {
			dst = appendString(dst, f.Name)
		}
		dst = appendString(dst, f.Value)
	}
	return dst
}

// appendString appends a string literal (§5.2), Huffman-coded when that is shorter.
func appendString(dst []byte, s string) []byte {
	if h := huffmanLen(s); h < len(s) {
		return appendHuffman(appendInt(dst, 7, 0x80, uint64(h)), s)
	}
	return append(appendInt(dst, 7, 0, uint64(len(s))), s...)
}

// HeadersFrame is a HEADERS frame built once (END_HEADERS set, its block from
// AppendHeaderBlock) and sent on any stream: Append copies it and writes the stream id.
// Immutable: safe for concurrent use.
type HeadersFrame struct {
	b []byte
}

// NewHeadersFrame builds the frame for fields, with END_STREAM when endStream (trailers, or a
// trailers-only answer). It refuses a block longer than the least SETTINGS_MAX_FRAME_SIZE
// every peer accepts, 16384 bytes, so that the frame never needs CONTINUATION frames.
func NewHeadersFrame(endStream bool, fields ...HeaderField) (*HeadersFrame, error) {
	block := AppendHeaderBlock(nil, fields...)
	if len(block) > DefaultMaxFrameSize {
		return nil, fmt.Errorf("h2: header block of %d bytes exceeds one frame of %d", len(block), DefaultMaxFrameSize)
	}
	flags := http2.FlagHeadersEndHeaders
	if endStream {
		flags |= http2.FlagHeadersEndStream
	}
	b := AppendFrameHeader(make([]byte, 0, FrameHeaderLen+len(block)),
		FrameHeader{Length: uint32(len(block)), Type: http2.FrameHeaders, Flags: flags})
	return &HeadersFrame{b: append(b, block...)}, nil
}

// Len is the frame's length in bytes, its header included.
func (f *HeadersFrame) Len() int { return len(f.b) }

// Append appends the frame for stream streamID to dst.
func (f *HeadersFrame) Append(dst []byte, streamID uint32) []byte {
	n := len(dst)
	dst = append(dst, f.b...)
	binary.BigEndian.PutUint32(dst[n+5:], streamID&streamMask)
	return dst
}

// The fields of otlpgate's gRPC answers and calls.
var (
	// GRPCResponseHeaders open a successful answer.
	GRPCResponseHeaders = []HeaderField{{":status", "200"}, {"content-type", "application/grpc"}}
	// GRPCTrailersOK close a successful answer.
	GRPCTrailersOK = []HeaderField{{"grpc-status", "0"}}
)

// GRPCRequestHeaders are the fields of a call to path (a method's full name) on authority:
// scheme is "http" or "https"; encoding, when not empty, is the grpc-encoding of the call's
// messages; extra follow (a destination's headers, in lower case).
func GRPCRequestHeaders(scheme, authority, path, encoding, userAgent string, extra ...HeaderField) []HeaderField {
	fs := []HeaderField{
		{":method", "POST"}, {":scheme", scheme}, {":path", path}, {":authority", authority},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"user-agent", userAgent},
	}
	if encoding != "" {
		fs = append(fs, HeaderField{"grpc-encoding", encoding})
	}
	return append(fs, extra...)
}
