package grpcserver

import (
	"encoding/base64"
	"strconv"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/internal/h2"
)

// The answers of otlpgate's own transport (-grpc.transport=otlpgate) are written from frames
// built once: a success is the response headers, one DATA frame with the ExportResponse, and
// the trailers, each with only its stream id written; an error is one trailers-only HEADERS
// frame carrying grpc-status, grpc-message and grpc-status-details-bin as grpc-go sends them
// (its http2_server.go, WriteStatus), built when the error is answered.

var (
	h2RespHeaders = mustHeadersFrame(false, h2.GRPCResponseHeaders...)
	h2TrailersOK  = mustHeadersFrame(true, h2.GRPCTrailersOK...)
)

func mustHeadersFrame(endStream bool, fields ...h2.HeaderField) *h2.HeadersFrame {
	f, err := h2.NewHeadersFrame(endStream, fields...)
	if err != nil {
		panic("BUG: grpc: " + err.Error())
	}
	return f
}

// maxGRPCMessage bounds the grpc-message of an answer, so that its frame fits 16 KiB.
const maxGRPCMessage = 4 << 10

// trailersOnlyFrame is the trailers-only answer of err (a status error; any other as
// UNKNOWN), with :status httpStatus: grpc-go's fields, in its order.
func trailersOnlyFrame(err error, httpStatus int) *h2.HeadersFrame {
	return statusFrame(err, []h2.HeaderField{
		{Name: ":status", Value: strconv.Itoa(httpStatus)},
		{Name: "content-type", Value: "application/grpc"},
	})
}

// trailersFrame is the trailers of err (as trailersOnlyFrame) that end a stream whose headers
// and messages went out before: the status fields only.
func trailersFrame(err error) *h2.HeadersFrame {
	return statusFrame(err, nil)
}

// statusFrame is a HEADERS frame ending the stream with fields, then err's status fields.
func statusFrame(err error, fields []h2.HeaderField) *h2.HeadersFrame {
	st := status.Convert(err)
	lead := len(fields)
	fields = append(fields, h2.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(st.Code()))})
	if msg := st.Message(); msg != "" {
		if len(msg) > maxGRPCMessage {
			msg = msg[:maxGRPCMessage]
		}
		fields = append(fields, h2.HeaderField{Name: "grpc-message", Value: encodeGRPCMessage(msg)})
	}
	if p := st.Proto(); len(p.GetDetails()) > 0 {
		if b, err := proto.Marshal(p); err == nil {
			fields = append(fields, h2.HeaderField{Name: "grpc-status-details-bin", Value: base64.RawStdEncoding.EncodeToString(b)})
		}
	}
	f, ferr := h2.NewHeadersFrame(true, fields...)
	if ferr != nil {
		return mustHeadersFrame(true, append(fields[:lead:lead], h2.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(codes.Internal))})...)
	}
	return f
}

// encodeGRPCMessage percent-encodes msg as the gRPC protocol asks of grpc-message (and as
// grpc-go does): every byte outside printable ASCII, and '%'.
func encodeGRPCMessage(msg string) string {
	clean := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c > 0x7e || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(msg)+8)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

// appendDataFrame appends a DATA frame of stream id holding payload.
func appendDataFrame(dst []byte, id uint32, endStream bool, payload []byte) []byte {
	var fl http2.Flags
	if endStream {
		fl = http2.FlagDataEndStream
	}
	dst = h2.AppendFrameHeader(dst, h2.FrameHeader{Length: uint32(len(payload)), Type: http2.FrameData, Flags: fl, StreamID: id})
	return append(dst, payload...)
}

// appendRSTStream appends an RST_STREAM frame.
func appendRSTStream(dst []byte, id uint32, code http2.ErrCode) []byte {
	dst = h2.AppendFrameHeader(dst, h2.FrameHeader{Length: 4, Type: http2.FrameRSTStream, StreamID: id})
	return append(dst, byte(code>>24), byte(code>>16), byte(code>>8), byte(code))
}

// appendWindowUpdate appends a WINDOW_UPDATE frame (stream 0: the connection's window).
func appendWindowUpdate(dst []byte, id, inc uint32) []byte {
	dst = h2.AppendFrameHeader(dst, h2.FrameHeader{Length: 4, Type: http2.FrameWindowUpdate, StreamID: id})
	return append(dst, byte(inc>>24), byte(inc>>16), byte(inc>>8), byte(inc))
}

// appendGoAway appends a GOAWAY frame with debug data.
func appendGoAway(dst []byte, last uint32, code http2.ErrCode, debug string) []byte {
	dst = h2.AppendFrameHeader(dst, h2.FrameHeader{Length: uint32(8 + len(debug)), Type: http2.FrameGoAway})
	dst = append(dst, byte(last>>24)&0x7f, byte(last>>16), byte(last>>8), byte(last),
		byte(code>>24), byte(code>>16), byte(code>>8), byte(code))
	return append(dst, debug...)
}

// appendPing appends a PING frame.
func appendPing(dst []byte, ack bool, data [8]byte) []byte {
	var fl http2.Flags
	if ack {
		fl = http2.FlagPingAck
	}
	dst = h2.AppendFrameHeader(dst, h2.FrameHeader{Length: 8, Type: http2.FramePing, Flags: fl})
	return append(dst, data[:]...)
}

// appendSettings appends a SETTINGS frame of the given parameters (none and ack: an
// acknowledgement).
func appendSettings(dst []byte, ack bool, params ...http2.Setting) []byte {
	var fl http2.Flags
	if ack {
		fl = http2.FlagSettingsAck
	}
	dst = h2.AppendFrameHeader(dst, h2.FrameHeader{Length: uint32(6 * len(params)), Type: http2.FrameSettings, Flags: fl})
	for _, p := range params {
		dst = append(dst, byte(p.ID>>8), byte(p.ID), byte(p.Val>>24), byte(p.Val>>16), byte(p.Val>>8), byte(p.Val))
	}
	return dst
}
