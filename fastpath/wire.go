package fastpath

import (
	"errors"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// Errors of the raw scanner and of the layout conversion. They are pre-made so that rejecting a
// request costs no allocation; the caller counts the rejection under its own protocol label.
var (
	// ErrTruncated: a varint (tag, length or value) or a fixed-size value runs past the end of
	// its message.
	ErrTruncated = errors.New("fastpath: truncated varint or fixed-size value")
	// ErrLengthOverflow: a length prefix claims more bytes than its enclosing message holds.
	ErrLengthOverflow = errors.New("fastpath: length exceeds the enclosing message")
	// ErrVarintOverflow: a varint does not fit in 64 bits.
	ErrVarintOverflow = errors.New("fastpath: varint overflows 64 bits")
	// ErrFieldNumber: a tag carries field number 0 or one above 2^29-1.
	ErrFieldNumber = errors.New("fastpath: invalid field number")
	// ErrWireType: a field the schema knows arrives with another wire type.
	ErrWireType = errors.New("fastpath: wrong wire type for a known field")
	// ErrGroup: a group or reserved wire type (3, 4, 6, 7). No proto3 schema produces groups,
	// so OTLP never carries them, not even in fields a newer schema may add.
	ErrGroup = errors.New("fastpath: group or reserved wire type")
	// ErrPacked: a packed repeated field does not hold a whole number of elements.
	ErrPacked = errors.New("fastpath: packed field does not end on an element boundary")
	// ErrUTF8: a string field holds bytes that are not UTF-8 (checked at DepthFull only).
	ErrUTF8 = errors.New("fastpath: string field is not valid UTF-8")
	// ErrIDLength: a trace id that is neither empty nor 16 bytes, or a span id (span_id,
	// parent_span_id, the ids of links, log records and exemplars) neither empty nor 8 bytes
	// (checked at DepthFull only). The OpenTelemetry Collector's decoder (pdata) refuses such a
	// request whole, and with it every request sharing its batch.
	ErrIDLength = errors.New("fastpath: trace id not 0 or 16 bytes, or span id not 0 or 8")
	// ErrNesting: messages nest deeper than MaxNesting.
	ErrNesting = errors.New("fastpath: messages nested too deep")
	// ErrSignal, ErrLayout, ErrDepth: the caller passed a value outside its enum.
	ErrSignal = errors.New("fastpath: unknown signal")
	ErrLayout = errors.New("fastpath: unknown layout")
	ErrDepth  = errors.New("fastpath: unknown depth")
	// ErrFieldCollision: a v1 request carries a top-level field 2, which no v1 schema defines
	// and which OTEP uses for resource entries; carrying it over would invent an entry.
	// AppendOTEP returns it; admission strips such a field (AppendEntries), so no batch has one.
	ErrFieldCollision = errors.New("fastpath: v1 request has a top-level field 2")
)

// varintErr maps a protowire error code from ConsumeVarint, which reports only truncation and
// overflow, to our sentinel.
func varintErr(n int) error {
	if protowire.ParseError(n) == io.ErrUnexpectedEOF {
		return ErrTruncated
	}
	return ErrVarintOverflow
}

// consumeTag reads a field tag. It returns n > 0 bytes consumed, or an error.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int, error) {
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, 0, 0, varintErr(n)
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
		return 0, 0, 0, ErrFieldNumber
	}
	return num, typ, n, nil
}

// consumeLen reads a length-delimited value: its payload is b[p:n], where p is the size of
// the length prefix and n the size of prefix and payload together.
func consumeLen(b []byte) (p, n int, err error) {
	l, p := protowire.ConsumeVarint(b)
	if p < 0 {
		return 0, 0, varintErr(p)
	}
	if l > uint64(len(b)-p) {
		return 0, 0, ErrLengthOverflow
	}
	return p, p + int(l), nil
}

// skipValue returns how many bytes the value of a field of wire type typ takes at the start
// of b, checking only that it is well-formed.
func skipValue(b []byte, typ protowire.Type) (int, error) {
	switch typ {
	case protowire.VarintType:
		_, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return 0, varintErr(n)
		}
		return n, nil
	case protowire.Fixed64Type:
		if len(b) < 8 {
			return 0, ErrTruncated
		}
		return 8, nil
	case protowire.Fixed32Type:
		if len(b) < 4 {
			return 0, ErrTruncated
		}
		return 4, nil
	case protowire.BytesType:
		_, n, err := consumeLen(b)
		return n, err
	}
	return 0, ErrGroup
}
