package h2

import "golang.org/x/net/http2"

// Error is an HTTP/2 error as RFC 9113 §5.4 defines them: a connection error ends the connection
// with a GOAWAY carrying Code; a stream error resets only the stream of the frame that caused it
// with an RST_STREAM carrying Code. Every Error this package returns is one of the package-level
// values below, so returning one costs no allocation; compare with errors.As or a type assertion
// and read Code and Stream.
type Error struct {
	Code   http2.ErrCode
	Stream bool // a stream error (reset the frame's stream); false: a connection error
	Reason string
}

func (e *Error) Error() string {
	scope := "connection"
	if e.Stream {
		scope = "stream"
	}
	return "h2: " + scope + " error " + e.Code.String() + ": " + e.Reason
}

func connErr(code http2.ErrCode, reason string) *Error {
	return &Error{Code: code, Reason: reason}
}

func streamErr(code http2.ErrCode, reason string) *Error {
	return &Error{Code: code, Stream: true, Reason: reason}
}

// The errors of frame parsing, by the rule of RFC 9113 that names them.
var (
	// §4.2: a frame longer than the SETTINGS_MAX_FRAME_SIZE this endpoint advertised. Treated as
	// a connection error for every type, which §4.2 allows: the frame's bytes are not read.
	ErrFrameTooLarge = connErr(http2.ErrCodeFrameSize, "frame exceeds SETTINGS_MAX_FRAME_SIZE")
	// §4.2, §6.1, §6.2: a frame too short to hold its Pad Length or priority fields.
	ErrFrameTooShort = connErr(http2.ErrCodeFrameSize, "frame too short for its fields")
	// §6.1, §6.2: padding as long as the payload that remains, or longer.
	ErrPadding = connErr(http2.ErrCodeProtocol, "padding exceeds the frame payload")
	// §6.1, §6.2, §6.3, §6.4, §6.10: a frame that belongs to a stream, on stream 0.
	ErrStreamZero = connErr(http2.ErrCodeProtocol, "stream frame on stream 0")
	// §6.5, §6.7, §6.8: a connection frame on a stream other than 0.
	ErrStreamNonZero = connErr(http2.ErrCodeProtocol, "connection frame on a stream")
	// §6.2, §6.3 with §5.3.1: a stream that depends on itself.
	ErrSelfDependency = streamErr(http2.ErrCodeProtocol, "stream depends on itself")
	// §6.3: a PRIORITY frame whose length is not 5.
	ErrPriorityLength = streamErr(http2.ErrCodeFrameSize, "PRIORITY frame length is not 5")
	// §6.4: an RST_STREAM frame whose length is not 4.
	ErrRSTStreamLength = connErr(http2.ErrCodeFrameSize, "RST_STREAM frame length is not 4")
	// §6.5: a SETTINGS frame whose length is not a multiple of 6.
	ErrSettingsLength = connErr(http2.ErrCodeFrameSize, "SETTINGS frame length is not a multiple of 6")
	// §6.5: a SETTINGS acknowledgement with a payload.
	ErrSettingsAckLength = connErr(http2.ErrCodeFrameSize, "SETTINGS ACK with a payload")
	// §6.5.2: SETTINGS_ENABLE_PUSH other than 0 or 1, or 1 from a server.
	ErrSettingsEnablePush = connErr(http2.ErrCodeProtocol, "invalid SETTINGS_ENABLE_PUSH")
	// §6.5.2: SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1.
	ErrSettingsWindow = connErr(http2.ErrCodeFlowControl, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1")
	// §6.5.2: SETTINGS_MAX_FRAME_SIZE outside 2^14 to 2^24-1.
	ErrSettingsFrameSize = connErr(http2.ErrCodeProtocol, "SETTINGS_MAX_FRAME_SIZE outside 2^14..2^24-1")
	// RFC 8441 §3 and RFC 9218 §2.1: the boolean settings other than 0 or 1.
	ErrSettingsBoolean = connErr(http2.ErrCodeProtocol, "boolean setting other than 0 or 1")
	// §6.7: a PING frame whose length is not 8.
	ErrPingLength = connErr(http2.ErrCodeFrameSize, "PING frame length is not 8")
	// §6.8: a GOAWAY frame shorter than 8.
	ErrGoAwayLength = connErr(http2.ErrCodeFrameSize, "GOAWAY frame shorter than 8")
	// §6.9: a WINDOW_UPDATE frame whose length is not 4.
	ErrWindowUpdateLength = connErr(http2.ErrCodeFrameSize, "WINDOW_UPDATE frame length is not 4")
	// §6.9: an increment of 0 for the connection's window.
	ErrWindowUpdateZeroConn = connErr(http2.ErrCodeProtocol, "WINDOW_UPDATE increment 0 on the connection")
	// §6.9: an increment of 0 for a stream's window.
	ErrWindowUpdateZeroStream = streamErr(http2.ErrCodeProtocol, "WINDOW_UPDATE increment 0 on a stream")
	// §8.4: a PUSH_PROMISE, which otlpgate never allows (it advertises SETTINGS_ENABLE_PUSH 0 as a
	// client, and a client may not push).
	ErrPushPromise = connErr(http2.ErrCodeProtocol, "PUSH_PROMISE received")
)

// The errors of HPACK decoding. A field block that cannot be decompressed leaves the two ends'
// dynamic tables out of step, so it ends the connection with COMPRESSION_ERROR (RFC 9113 §4.3);
// a header list over the receiver's bound is refused for its stream only, after the whole block
// was processed so that the table stays in step (§10.5.1).
var (
	// RFC 7541 §5.2: a Huffman code not in the table, EOS in a string, or bad padding.
	ErrHuffman = connErr(http2.ErrCodeCompression, "invalid Huffman-coded string")
	// RFC 7541 §2.3.3: index 0, or an index past the end of the tables.
	ErrIndex = connErr(http2.ErrCodeCompression, "invalid table index")
	// RFC 7541 §5.1: an integer past 2^32-1 or with more octets than 10.
	ErrInteger = connErr(http2.ErrCodeCompression, "integer too large")
	// A representation cut off by the end of the block.
	ErrTruncated = connErr(http2.ErrCodeCompression, "truncated field block")
	// RFC 7541 §4.2: a dynamic table size update after the first field of a block.
	ErrSizeUpdatePlace = connErr(http2.ErrCodeCompression, "dynamic table size update after a field")
	// RFC 7541 §6.3: a dynamic table size above SETTINGS_HEADER_TABLE_SIZE.
	ErrSizeUpdateTooLarge = connErr(http2.ErrCodeCompression, "dynamic table size update above the bound")
	// RFC 9113 §6.5.2: a header list larger, as decoded (each field's name, value and 32), than
	// the bound this endpoint advertised in SETTINGS_MAX_HEADER_LIST_SIZE.
	ErrHeaderListTooLarge = streamErr(http2.ErrCodeProtocol, "header list exceeds SETTINGS_MAX_HEADER_LIST_SIZE")
	// More fields of the kept names than Config.MaxKeptFields.
	ErrTooManyFields = streamErr(http2.ErrCodeProtocol, "too many fields of the kept names")
	// RFC 9113 §8.2.1, §8.3 (Config.Request): a name in upper case, a pseudo-field a request
	// does not have, or one after a regular field.
	ErrMalformedFields = streamErr(http2.ErrCodeProtocol, "malformed request field names")
)
