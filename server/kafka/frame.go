package kafka

import (
	"encoding/binary"
	"errors"
)

// A Kafka request on the wire: int32 size, then the header
//
//	api_key int16, api_version int16, correlation_id int32,
//	client_id nullable string with an int16 length (even in flexible headers),
//	tagged fields (uvarint count, then key, size, bytes) in header v2 only,
//
// then the body.

var (
	errShortHeader = errors.New("kafka: request header truncated")
	errBadClientID = errors.New("kafka: client id length exceeds the request")
	errBadTags     = errors.New("kafka: malformed tagged fields in request header")
)

// minRequestSize is the smallest request: key, version and correlation id.
const minRequestSize = 8

// header is a parsed request header; parsePrefix resets it.
type header struct {
	key         int16
	version     int16
	correlation int32
	// clientID is nil for a null client id. valid until the next request is read into the
	// buffer it points into; copy to retain.
	clientID []byte
	// body is the request body; same lifetime as clientID.
	body []byte
}

// parsePrefix reads key, version and correlation id, which every request has at fixed offsets,
// and leaves the rest of the header unparsed. It fails only on a request under 8 bytes.
func parsePrefix(req []byte, h *header) error {
	*h = header{}
	if len(req) < minRequestSize {
		return errShortHeader
	}
	h.key = int16(binary.BigEndian.Uint16(req))
	h.version = int16(binary.BigEndian.Uint16(req[2:]))
	h.correlation = int32(binary.BigEndian.Uint32(req[4:]))
	return nil
}

// parseHeader parses a whole request header after parsePrefix: the client id and, for flexible
// versions, the header's tagged fields, which are skipped. body gets the rest.
func parseHeader(req []byte, h *header, flexible bool) error {
	b := req[minRequestSize:]
	if len(b) < 2 {
		return errShortHeader
	}
	n := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	switch {
	case n == -1:
		h.clientID = nil
	case n < 0 || n > len(b):
		return errBadClientID
	default:
		h.clientID = b[:n:n]
		b = b[n:]
	}
	if flexible {
		var err error
		if b, err = skipTags(b); err != nil {
			return err
		}
	}
	h.body = b
	return nil
}

// skipTags skips a tagged-field section: a uvarint count, then per field a uvarint tag, a uvarint
// size and that many bytes.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, errBadTags
	}
	b = b[n:]
	for range count {
		_, n = binary.Uvarint(b)
		if n <= 0 {
			return nil, errBadTags
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errBadTags
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// appendResponseStart reserves the size and writes the response header: the correlation id and,
// for header v1, an empty tagged-field section. finishResponse fills in the size.
func appendResponseStart(dst []byte, correlation int32, flexible bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlation))
	if flexible {
		dst = append(dst, 0)
	}
	return dst
}

// finishResponse writes the size of the response that starts at start.
func finishResponse(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
