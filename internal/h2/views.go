package h2

import (
	"encoding/binary"

	"golang.org/x/net/http2"
)

// The typed views of a Frame. Each checks the rules RFC 9113 gives its type that a single frame
// can break (lengths, stream 0 or not, padding, values) and returns the error code the RFC
// names; rules about a frame's place in the connection (a CONTINUATION that follows no HEADERS,
// a DATA frame on an idle stream) belong to the connection's state, not to these. Byte slices
// in a view point into the frame's payload. Each is a pure function of the frame: safe for
// concurrent use.

// Data is a DATA frame (§6.1).
type Data struct {
	StreamID  uint32
	Data      []byte // the data, without padding
	EndStream bool
	// FlowLen is what the frame costs the flow-control windows: its whole payload, padding and
	// Pad Length field included (§6.9.1).
	FlowLen uint32
}

// Data returns the frame as a DATA frame.
func (f Frame) Data() (Data, error) {
	if f.StreamID == 0 {
		return Data{}, ErrStreamZero
	}
	p, err := f.unpad(f.Has(http2.FlagDataPadded), 0)
	if err != nil {
		return Data{}, err
	}
	return Data{StreamID: f.StreamID, Data: p, EndStream: f.Has(http2.FlagDataEndStream), FlowLen: f.Length}, nil
}

// Headers is a HEADERS frame (§6.2).
type Headers struct {
	StreamID    uint32
	Fragment    []byte // the field block fragment, without padding and priority
	EndStream   bool
	EndHeaders  bool
	HasPriority bool
	Priority    http2.PriorityParam // RFC 7540's fields, when HasPriority; deprecated, parsed to be checked
}

// Headers returns the frame as a HEADERS frame.
func (f Frame) Headers() (Headers, error) {
	if f.StreamID == 0 {
		return Headers{}, ErrStreamZero
	}
	h := Headers{
		StreamID:    f.StreamID,
		EndStream:   f.Has(http2.FlagHeadersEndStream),
		EndHeaders:  f.Has(http2.FlagHeadersEndHeaders),
		HasPriority: f.Has(http2.FlagHeadersPriority),
	}
	prio := 0
	if h.HasPriority {
		prio = 5
	}
	p, err := f.unpad(f.Has(http2.FlagHeadersPadded), prio)
	if err != nil {
		return Headers{}, err
	}
	if h.HasPriority {
		h.Priority = parsePriority(p)
		if h.Priority.StreamDep == f.StreamID {
			return Headers{}, ErrSelfDependency
		}
		p = p[5:]
	}
	h.Fragment = p
	return h, nil
}

func parsePriority(p []byte) http2.PriorityParam {
	v := binary.BigEndian.Uint32(p)
	return http2.PriorityParam{StreamDep: v & streamMask, Exclusive: v>>31 == 1, Weight: p[4]}
}

// Priority is a PRIORITY frame (§6.3). RFC 9113 deprecates its meaning; a receiver still checks
// it.
type Priority struct {
	StreamID uint32
	Priority http2.PriorityParam
}

// Priority returns the frame as a PRIORITY frame.
func (f Frame) Priority() (Priority, error) {
	if f.StreamID == 0 {
		return Priority{}, ErrStreamZero
	}
	if len(f.Payload) != 5 {
		return Priority{}, ErrPriorityLength
	}
	p := Priority{StreamID: f.StreamID, Priority: parsePriority(f.Payload)}
	if p.Priority.StreamDep == f.StreamID {
		return Priority{}, ErrSelfDependency
	}
	return p, nil
}

// RSTStream is an RST_STREAM frame (§6.4).
type RSTStream struct {
	StreamID uint32
	Code     http2.ErrCode
}

// RSTStream returns the frame as an RST_STREAM frame.
func (f Frame) RSTStream() (RSTStream, error) {
	if len(f.Payload) != 4 { // the length first, as x/net checks it
		return RSTStream{}, ErrRSTStreamLength
	}
	if f.StreamID == 0 {
		return RSTStream{}, ErrStreamZero
	}
	return RSTStream{StreamID: f.StreamID, Code: http2.ErrCode(binary.BigEndian.Uint32(f.Payload))}, nil
}

// Settings is a SETTINGS frame (§6.5): an acknowledgement, or a list of parameters read in
// place with Len and At. Every parameter was checked when the view was made.
type Settings struct {
	Ack bool
	raw []byte
}

// Len is the number of parameters in the frame.
func (s Settings) Len() int { return len(s.raw) / 6 }

// At returns the i-th parameter, in the order the peer sent them (a later one of the same ID
// overrides an earlier one, §6.5.3).
func (s Settings) At(i int) http2.Setting {
	p := s.raw[i*6:]
	return http2.Setting{ID: http2.SettingID(binary.BigEndian.Uint16(p)), Val: binary.BigEndian.Uint32(p[2:])}
}

// Settings returns the frame as a SETTINGS frame. fromServer says the peer is the server: a
// server may not enable push (§6.5.2). Unknown parameters are kept and must be ignored (§6.5.2).
func (f Frame) Settings(fromServer bool) (Settings, error) {
	// In x/net's order of checks, so that a frame that breaks two rules gets the same code from
	// both implementations.
	if f.Has(http2.FlagSettingsAck) && len(f.Payload) != 0 {
		return Settings{}, ErrSettingsAckLength
	}
	if f.StreamID != 0 {
		return Settings{}, ErrStreamNonZero
	}
	if f.Has(http2.FlagSettingsAck) {
		return Settings{Ack: true}, nil
	}
	if len(f.Payload)%6 != 0 {
		return Settings{}, ErrSettingsLength
	}
	s := Settings{raw: f.Payload}
	for i := range s.Len() {
		if err := checkSetting(s.At(i), fromServer); err != nil {
			return Settings{}, err
		}
	}
	return s, nil
}

// checkSetting holds a parameter to the bounds of §6.5.2 (and of RFC 8441 and RFC 9218 for the
// two boolean parameters they define).
func checkSetting(s http2.Setting, fromServer bool) error {
	switch s.ID {
	case http2.SettingEnablePush:
		if s.Val > 1 || (fromServer && s.Val != 0) {
			return ErrSettingsEnablePush
		}
	case http2.SettingInitialWindowSize:
		if s.Val > MaxWindow {
			return ErrSettingsWindow
		}
	case http2.SettingMaxFrameSize:
		if s.Val < DefaultMaxFrameSize || s.Val > MaxFrameSizeLimit {
			return ErrSettingsFrameSize
		}
	case http2.SettingEnableConnectProtocol, http2.SettingNoRFC7540Priorities:
		if s.Val > 1 {
			return ErrSettingsBoolean
		}
	}
	return nil
}

// Ping is a PING frame (§6.7).
type Ping struct {
	Ack  bool
	Data [8]byte
}

// Ping returns the frame as a PING frame.
func (f Frame) Ping() (Ping, error) {
	if len(f.Payload) != 8 { // the length first, as x/net checks it
		return Ping{}, ErrPingLength
	}
	if f.StreamID != 0 {
		return Ping{}, ErrStreamNonZero
	}
	return Ping{Ack: f.Has(http2.FlagPingAck), Data: [8]byte(f.Payload)}, nil
}

// GoAway is a GOAWAY frame (§6.8).
type GoAway struct {
	LastStreamID uint32
	Code         http2.ErrCode
	Debug        []byte // opaque diagnostic data, points into the payload
}

// GoAway returns the frame as a GOAWAY frame.
func (f Frame) GoAway() (GoAway, error) {
	if f.StreamID != 0 {
		return GoAway{}, ErrStreamNonZero
	}
	if len(f.Payload) < 8 {
		return GoAway{}, ErrGoAwayLength
	}
	return GoAway{
		LastStreamID: binary.BigEndian.Uint32(f.Payload) & streamMask,
		Code:         http2.ErrCode(binary.BigEndian.Uint32(f.Payload[4:])),
		Debug:        f.Payload[8:],
	}, nil
}

// WindowUpdate is a WINDOW_UPDATE frame (§6.9): stream 0 for the connection's window.
type WindowUpdate struct {
	StreamID  uint32
	Increment uint32 // 1 to 2^31-1
}

// WindowUpdate returns the frame as a WINDOW_UPDATE frame.
func (f Frame) WindowUpdate() (WindowUpdate, error) {
	if len(f.Payload) != 4 {
		return WindowUpdate{}, ErrWindowUpdateLength
	}
	inc := binary.BigEndian.Uint32(f.Payload) & streamMask
	if inc == 0 {
		if f.StreamID == 0 {
			return WindowUpdate{}, ErrWindowUpdateZeroConn
		}
		return WindowUpdate{}, ErrWindowUpdateZeroStream
	}
	return WindowUpdate{StreamID: f.StreamID, Increment: inc}, nil
}

// Continuation is a CONTINUATION frame (§6.10).
type Continuation struct {
	StreamID   uint32
	Fragment   []byte
	EndHeaders bool
}

// Continuation returns the frame as a CONTINUATION frame. That it follows a HEADERS frame of
// the same stream without END_HEADERS is the connection's rule to check (§6.10).
func (f Frame) Continuation() (Continuation, error) {
	if f.StreamID == 0 {
		return Continuation{}, ErrStreamZero
	}
	return Continuation{StreamID: f.StreamID, Fragment: f.Payload, EndHeaders: f.Has(http2.FlagContinuationEndHeaders)}, nil
}

// PushPromise refuses the frame: otlpgate never accepts server push (a server may not be pushed
// to, §8.4, and as a client otlpgate advertises SETTINGS_ENABLE_PUSH 0, §6.5.2).
func (f Frame) PushPromise() error { return ErrPushPromise }
