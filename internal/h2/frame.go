package h2

import (
	"encoding/binary"

	"golang.org/x/net/http2"
)

// Sizes from RFC 9113.
const (
	// FrameHeaderLen is the length of every frame's header (§4.1).
	FrameHeaderLen = 9
	// DefaultMaxFrameSize is SETTINGS_MAX_FRAME_SIZE's initial value and its least (§6.5.2).
	DefaultMaxFrameSize = 1 << 14
	// MaxFrameSizeLimit is the largest SETTINGS_MAX_FRAME_SIZE a peer may advertise (§6.5.2).
	MaxFrameSizeLimit = 1<<24 - 1
	// MaxWindow is the largest flow-control window (§6.9.1).
	MaxWindow = 1<<31 - 1
	// ClientPreface is what a client sends before its first frame (§3.4).
	ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
)

// streamMask clears the reserved bit above every 31-bit stream identifier, which a receiver
// must ignore (§4.1).
const streamMask = 1<<31 - 1

// FrameHeader is the fixed 9-byte header of a frame (§4.1).
type FrameHeader struct {
	Length   uint32 // the payload's length, 24 bits
	Type     http2.FrameType
	Flags    http2.Flags
	StreamID uint32 // 31 bits, the reserved bit cleared
}

// Has reports whether every bit of f is set in the header's flags.
func (h FrameHeader) Has(f http2.Flags) bool { return h.Flags&f == f }

// ParseFrameHeader reads the header at the start of b, which must hold at least FrameHeaderLen
// bytes.
func ParseFrameHeader(b []byte) FrameHeader {
	_ = b[FrameHeaderLen-1]
	return FrameHeader{
		Length:   uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]),
		Type:     http2.FrameType(b[3]),
		Flags:    http2.Flags(b[4]),
		StreamID: binary.BigEndian.Uint32(b[5:]) & streamMask,
	}
}

// AppendFrameHeader appends h's 9 bytes to dst. Length must fit 24 bits.
func AppendFrameHeader(dst []byte, h FrameHeader) []byte {
	if h.Length > MaxFrameSizeLimit {
		panic("BUG: h2: frame length above 2^24-1")
	}
	return append(dst, byte(h.Length>>16), byte(h.Length>>8), byte(h.Length), byte(h.Type), byte(h.Flags),
		byte(h.StreamID>>24)&0x7f, byte(h.StreamID>>16), byte(h.StreamID>>8), byte(h.StreamID))
}

// Frame is one frame as read: its header and its payload, which is a sub-slice of the bytes the
// frame was parsed from (valid as long as they are; nothing is copied). The typed views (Data,
// Headers, Settings...) check the payload against the rules of its type and return a view of the
// same bytes; a frame of a type this package has no view for (PRIORITY_UPDATE and any unknown
// type) must be ignored and skipped (§4.1, §5.5).
type Frame struct {
	FrameHeader
	Payload []byte
}

// NextFrame splits the first frame off b. It returns the frame and the number of bytes it
// spans; n is 0 (and err nil) when b does not hold a whole frame yet. A frame longer than
// maxFrameSize (the SETTINGS_MAX_FRAME_SIZE this endpoint advertised) is refused as soon as its
// header is there, with ErrFrameTooLarge, so that no one waits for, buffers or reads its
// payload. Safe for concurrent use (it touches only its arguments).
func NextFrame(b []byte, maxFrameSize uint32) (f Frame, n int, err error) {
	if len(b) < FrameHeaderLen {
		return Frame{}, 0, nil
	}
	f.FrameHeader = ParseFrameHeader(b)
	if f.Length > maxFrameSize {
		return Frame{}, 0, ErrFrameTooLarge
	}
	end := FrameHeaderLen + int(f.Length)
	if len(b) < end {
		return Frame{}, 0, nil
	}
	f.Payload = b[FrameHeaderLen:end:end]
	return f, end, nil
}

// Known reports whether the frame's type is one RFC 9113 defines. Frames of other types (and
// PRIORITY_UPDATE, which otlpgate does not use) are ignored by the receiver (§5.5).
func (f Frame) Known() bool { return f.Type <= http2.FrameContinuation }

// unpad strips the Pad Length field and the padding of a PADDED frame, and the priority fields
// when prio is set (HEADERS). It returns what remains between them.
func (f Frame) unpad(padded bool, prio int) ([]byte, error) {
	p := f.Payload
	if !padded {
		if len(p) < prio {
			return nil, ErrFrameTooShort
		}
		return p, nil
	}
	if len(p) < 1+prio {
		return nil, ErrFrameTooShort
	}
	pad := int(p[0])
	p = p[1:]
	// §6.1, §6.2: padding as long as what remains after the fields, or longer, is an error.
	// DATA without fields may be all padding but its Pad Length byte; HEADERS the same after
	// its priority fields.
	if pad > len(p)-prio {
		return nil, ErrPadding
	}
	return p[:len(p)-pad], nil
}
