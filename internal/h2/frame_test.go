package h2

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"golang.org/x/net/http2"
)

// framed returns the bytes x/net's Framer writes for the frames write produces.
func framed(t testing.TB, write func(fr *http2.Framer) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	fr.AllowIllegalWrites = true
	if err := write(fr); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// raw builds a frame from its parts, for frames no conforming writer produces.
func raw(typ http2.FrameType, flags http2.Flags, stream uint32, payload ...byte) []byte {
	b := AppendFrameHeader(nil, FrameHeader{Length: uint32(len(payload)), Type: typ, Flags: flags, StreamID: stream})
	return append(b, payload...)
}

func one(t *testing.T, b []byte) Frame {
	t.Helper()
	f, n, err := NextFrame(b, DefaultMaxFrameSize)
	if err != nil || n != len(b) {
		t.Fatalf("NextFrame: n=%d of %d, err %v", n, len(b), err)
	}
	return f
}

func TestNextFrameSplitsAStream(t *testing.T) {
	stream := framed(t, func(fr *http2.Framer) error {
		if err := fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20}); err != nil {
			return err
		}
		if err := fr.WriteData(1, false, []byte("hello")); err != nil {
			return err
		}
		return fr.WritePing(true, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	})
	var types []http2.FrameType
	for b := stream; len(b) > 0; {
		// Every prefix short of the whole frame asks for more, without an error.
		f, n, err := NextFrame(b, DefaultMaxFrameSize)
		if err != nil || n == 0 {
			t.Fatalf("NextFrame: n=%d err=%v", n, err)
		}
		for cut := 0; cut < n; cut++ {
			if _, m, err := NextFrame(b[:cut], DefaultMaxFrameSize); m != 0 || err != nil {
				t.Fatalf("a prefix of %d bytes of a %d-byte frame: n=%d err=%v", cut, n, m, err)
			}
		}
		types = append(types, f.Type)
		b = b[n:]
	}
	if want := []http2.FrameType{http2.FrameSettings, http2.FrameData, http2.FramePing}; !reflect.DeepEqual(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
}

func TestNextFrameRefusesOversizeOnTheHeader(t *testing.T) {
	b := AppendFrameHeader(nil, FrameHeader{Length: DefaultMaxFrameSize + 1, Type: http2.FrameData, StreamID: 1})
	if _, _, err := NextFrame(b, DefaultMaxFrameSize); err != ErrFrameTooLarge {
		t.Fatalf("err %v, want ErrFrameTooLarge before the payload arrived", err)
	}
	b = append(b, make([]byte, DefaultMaxFrameSize+1)...)
	if _, n, err := NextFrame(b, DefaultMaxFrameSize+1); err != nil || n != len(b) {
		t.Fatalf("a frame within a larger bound: n=%d err=%v", n, err)
	}
}

func TestFrameHeaderRoundTrip(t *testing.T) {
	// The reserved bit of the stream id is ignored on read (§4.1).
	b := []byte{0x01, 0x02, 0x03, 0x09, 0x04, 0x80, 0x00, 0x00, 0x07}
	h := ParseFrameHeader(b)
	want := FrameHeader{Length: 0x010203, Type: http2.FrameContinuation, Flags: 0x04, StreamID: 7}
	if h != want {
		t.Fatalf("%+v, want %+v", h, want)
	}
	if got := AppendFrameHeader(nil, h); !bytes.Equal(got, append([]byte{0x01, 0x02, 0x03, 0x09, 0x04, 0x00}, 0, 0, 7)) {
		t.Fatalf("%x", got)
	}
}

func TestDataFrame(t *testing.T) {
	f := one(t, framed(t, func(fr *http2.Framer) error {
		return fr.WriteDataPadded(3, true, []byte("payload"), make([]byte, 4))
	}))
	d, err := f.Data()
	want := Data{StreamID: 3, Data: []byte("payload"), EndStream: true, FlowLen: 1 + 7 + 4}
	if err != nil || !reflect.DeepEqual(d, want) {
		t.Fatalf("%+v %v, want %+v", d, err, want)
	}
	// All padding but the Pad Length byte is allowed; one byte more is not.
	if d, err := one(t, raw(http2.FrameData, http2.FlagDataPadded, 1, 3, 0, 0, 0)).Data(); err != nil || len(d.Data) != 0 {
		t.Fatalf("%+v %v", d, err)
	}
	checkErr(t, one(t, raw(http2.FrameData, http2.FlagDataPadded, 1, 4, 0, 0, 0)), ErrPadding)
	checkErr(t, one(t, raw(http2.FrameData, http2.FlagDataPadded, 1)), ErrFrameTooShort)
	checkErr(t, one(t, raw(http2.FrameData, 0, 0, 'x')), ErrStreamZero)
}

// checkErr asserts that the frame's view of its own type fails with want.
func checkErr(t *testing.T, f Frame, want *Error) {
	t.Helper()
	var err error
	switch f.Type {
	case http2.FrameData:
		_, err = f.Data()
	case http2.FrameHeaders:
		_, err = f.Headers()
	case http2.FramePriority:
		_, err = f.Priority()
	case http2.FrameRSTStream:
		_, err = f.RSTStream()
	case http2.FrameSettings:
		_, err = f.Settings(true)
	case http2.FramePushPromise:
		err = f.PushPromise()
	case http2.FramePing:
		_, err = f.Ping()
	case http2.FrameGoAway:
		_, err = f.GoAway()
	case http2.FrameWindowUpdate:
		_, err = f.WindowUpdate()
	case http2.FrameContinuation:
		_, err = f.Continuation()
	}
	var e *Error
	if !errors.As(err, &e) || e != want {
		t.Fatalf("%v frame: err %v, want %v", f.Type, err, want)
	}
}

func TestHeadersFrame(t *testing.T) {
	f := one(t, framed(t, func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{
			StreamID: 5, BlockFragment: []byte{0x82, 0x86}, EndStream: false, EndHeaders: true, PadLength: 3,
			Priority: http2.PriorityParam{StreamDep: 3, Exclusive: true, Weight: 200},
		})
	}))
	h, err := f.Headers()
	want := Headers{StreamID: 5, Fragment: []byte{0x82, 0x86}, EndHeaders: true, HasPriority: true,
		Priority: http2.PriorityParam{StreamDep: 3, Exclusive: true, Weight: 200}}
	if err != nil || !reflect.DeepEqual(h, want) {
		t.Fatalf("%+v %v, want %+v", h, err, want)
	}
	plain := one(t, framed(t, func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}, EndStream: true})
	}))
	if h, err := plain.Headers(); err != nil || !h.EndStream || h.EndHeaders || !bytes.Equal(h.Fragment, []byte{0x82}) {
		t.Fatalf("%+v %v", h, err)
	}
	prio := http2.FlagHeadersPriority
	padded := http2.FlagHeadersPadded
	checkErr(t, one(t, raw(http2.FrameHeaders, 0, 0, 0x82)), ErrStreamZero)
	checkErr(t, one(t, raw(http2.FrameHeaders, prio, 1, 0, 0, 0, 1)), ErrFrameTooShort)
	checkErr(t, one(t, raw(http2.FrameHeaders, prio, 1, 0, 0, 0, 1, 16)), ErrSelfDependency)
	checkErr(t, one(t, raw(http2.FrameHeaders, prio|padded, 1, 0, 0, 0, 0, 3)), ErrFrameTooShort)
	// Padding may take all that follows the priority fields, not one byte more.
	if h, err := one(t, raw(http2.FrameHeaders, prio|padded, 1, 1, 0, 0, 0, 3, 16, 0)).Headers(); err != nil || len(h.Fragment) != 0 {
		t.Fatalf("%+v %v", h, err)
	}
	checkErr(t, one(t, raw(http2.FrameHeaders, prio|padded, 1, 2, 0, 0, 0, 3, 16, 0)), ErrPadding)
}

func TestPriorityFrame(t *testing.T) {
	f := one(t, framed(t, func(fr *http2.Framer) error {
		return fr.WritePriority(7, http2.PriorityParam{StreamDep: 1, Weight: 15})
	}))
	p, err := f.Priority()
	if want := (Priority{StreamID: 7, Priority: http2.PriorityParam{StreamDep: 1, Weight: 15}}); err != nil || p != want {
		t.Fatalf("%+v %v", p, err)
	}
	checkErr(t, one(t, raw(http2.FramePriority, 0, 0, 0, 0, 0, 1, 0)), ErrStreamZero)
	checkErr(t, one(t, raw(http2.FramePriority, 0, 1, 0, 0, 0, 3)), ErrPriorityLength)
	checkErr(t, one(t, raw(http2.FramePriority, 0, 1, 0x80, 0, 0, 1, 0)), ErrSelfDependency)
}

func TestRSTStreamFrame(t *testing.T) {
	f := one(t, framed(t, func(fr *http2.Framer) error { return fr.WriteRSTStream(9, http2.ErrCodeCancel) }))
	if r, err := f.RSTStream(); err != nil || r != (RSTStream{StreamID: 9, Code: http2.ErrCodeCancel}) {
		t.Fatalf("%+v %v", r, err)
	}
	checkErr(t, one(t, raw(http2.FrameRSTStream, 0, 0, 0, 0, 0, 8)), ErrStreamZero)
	checkErr(t, one(t, raw(http2.FrameRSTStream, 0, 1, 0, 0, 8)), ErrRSTStreamLength)
}

func TestSettingsFrame(t *testing.T) {
	sent := []http2.Setting{
		{ID: http2.SettingHeaderTableSize, Val: 0},
		{ID: http2.SettingEnablePush, Val: 0},
		{ID: http2.SettingInitialWindowSize, Val: MaxWindow},
		{ID: http2.SettingMaxFrameSize, Val: MaxFrameSizeLimit},
		{ID: 0x4242, Val: 1 << 31}, // unknown: kept, to be ignored
	}
	f := one(t, framed(t, func(fr *http2.Framer) error { return fr.WriteSettings(sent...) }))
	s, err := f.Settings(true)
	if err != nil || s.Ack || s.Len() != len(sent) {
		t.Fatalf("%+v %v", s, err)
	}
	for i, want := range sent {
		if s.At(i) != want {
			t.Fatalf("setting %d: %v, want %v", i, s.At(i), want)
		}
	}
	ack := one(t, framed(t, func(fr *http2.Framer) error { return fr.WriteSettingsAck() }))
	if s, err := ack.Settings(false); err != nil || !s.Ack || s.Len() != 0 {
		t.Fatalf("%+v %v", s, err)
	}
	setting := func(id http2.SettingID, v uint32) []byte {
		return []byte{byte(id >> 8), byte(id), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
	}
	checkErr(t, one(t, raw(http2.FrameSettings, 0, 1)), ErrStreamNonZero)
	checkErr(t, one(t, raw(http2.FrameSettings, http2.FlagSettingsAck, 0, 0, 0, 0, 0, 0, 0)), ErrSettingsAckLength)
	checkErr(t, one(t, raw(http2.FrameSettings, 0, 0, 0, 1, 0)), ErrSettingsLength)
	for _, c := range []struct {
		s    []byte
		want *Error
	}{
		{setting(http2.SettingEnablePush, 2), ErrSettingsEnablePush},
		{setting(http2.SettingEnablePush, 1), ErrSettingsEnablePush}, // from a server
		{setting(http2.SettingInitialWindowSize, MaxWindow+1), ErrSettingsWindow},
		{setting(http2.SettingMaxFrameSize, DefaultMaxFrameSize-1), ErrSettingsFrameSize},
		{setting(http2.SettingMaxFrameSize, MaxFrameSizeLimit+1), ErrSettingsFrameSize},
		{setting(http2.SettingEnableConnectProtocol, 2), ErrSettingsBoolean},
		{setting(http2.SettingNoRFC7540Priorities, 7), ErrSettingsBoolean},
	} {
		checkErr(t, one(t, raw(http2.FrameSettings, 0, 0, c.s...)), c.want)
	}
	// A client may enable push (otlpgate will not push, but the setting is valid).
	if _, err := one(t, raw(http2.FrameSettings, 0, 0, setting(http2.SettingEnablePush, 1)...)).Settings(false); err != nil {
		t.Fatal(err)
	}
}

func TestPingFrame(t *testing.T) {
	f := one(t, framed(t, func(fr *http2.Framer) error { return fr.WritePing(true, [8]byte{8, 7, 6, 5, 4, 3, 2, 1}) }))
	if p, err := f.Ping(); err != nil || p != (Ping{Ack: true, Data: [8]byte{8, 7, 6, 5, 4, 3, 2, 1}}) {
		t.Fatalf("%+v %v", p, err)
	}
	checkErr(t, one(t, raw(http2.FramePing, 0, 1, make([]byte, 8)...)), ErrStreamNonZero)
	checkErr(t, one(t, raw(http2.FramePing, 0, 0, make([]byte, 7)...)), ErrPingLength)
}

func TestGoAwayFrame(t *testing.T) {
	f := one(t, framed(t, func(fr *http2.Framer) error { return fr.WriteGoAway(41, http2.ErrCodeEnhanceYourCalm, []byte("calm")) }))
	g, err := f.GoAway()
	if want := (GoAway{LastStreamID: 41, Code: http2.ErrCodeEnhanceYourCalm, Debug: []byte("calm")}); err != nil || !reflect.DeepEqual(g, want) {
		t.Fatalf("%+v %v", g, err)
	}
	checkErr(t, one(t, raw(http2.FrameGoAway, 0, 3, make([]byte, 8)...)), ErrStreamNonZero)
	checkErr(t, one(t, raw(http2.FrameGoAway, 0, 0, make([]byte, 7)...)), ErrGoAwayLength)
}

func TestWindowUpdateFrame(t *testing.T) {
	f := one(t, framed(t, func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, MaxWindow) }))
	if w, err := f.WindowUpdate(); err != nil || w != (WindowUpdate{Increment: MaxWindow}) {
		t.Fatalf("%+v %v", w, err)
	}
	// The reserved bit is not part of the increment.
	if w, err := one(t, raw(http2.FrameWindowUpdate, 0, 3, 0x80, 0, 0, 9)).WindowUpdate(); err != nil || w != (WindowUpdate{StreamID: 3, Increment: 9}) {
		t.Fatalf("%+v %v", w, err)
	}
	checkErr(t, one(t, raw(http2.FrameWindowUpdate, 0, 0, 0x80, 0, 0, 0)), ErrWindowUpdateZeroConn)
	checkErr(t, one(t, raw(http2.FrameWindowUpdate, 0, 1, 0, 0, 0, 0)), ErrWindowUpdateZeroStream)
	checkErr(t, one(t, raw(http2.FrameWindowUpdate, 0, 1, 0, 0, 1)), ErrWindowUpdateLength)
}

func TestContinuationAndPushPromise(t *testing.T) {
	f := one(t, framed(t, func(fr *http2.Framer) error { return fr.WriteContinuation(3, true, []byte{0x84}) }))
	if c, err := f.Continuation(); err != nil || !reflect.DeepEqual(c, Continuation{StreamID: 3, Fragment: []byte{0x84}, EndHeaders: true}) {
		t.Fatalf("%+v %v", c, err)
	}
	checkErr(t, one(t, raw(http2.FrameContinuation, 0, 0, 0x84)), ErrStreamZero)
	checkErr(t, one(t, raw(http2.FramePushPromise, 0, 1, 0, 0, 0, 2)), ErrPushPromise)
}

func TestUnknownFrameTypesAreSkipped(t *testing.T) {
	b := append(raw(0xfa, 0xff, 7, 1, 2, 3), raw(http2.FramePriorityUpdate, 0, 0, 0, 0, 0, 1, 'u')...)
	b = append(b, raw(http2.FramePing, 0, 0, make([]byte, 8)...)...)
	var known []http2.FrameType
	for len(b) > 0 {
		f, n, err := NextFrame(b, DefaultMaxFrameSize)
		if err != nil || n == 0 {
			t.Fatalf("n=%d err=%v", n, err)
		}
		if f.Known() {
			known = append(known, f.Type)
		}
		b = b[n:]
	}
	if !reflect.DeepEqual(known, []http2.FrameType{http2.FramePing}) {
		t.Fatalf("known frames %v", known)
	}
}

func TestErrorsNameTheirScope(t *testing.T) {
	if got := ErrWindowUpdateZeroStream.Error(); got != "h2: stream error PROTOCOL_ERROR: WINDOW_UPDATE increment 0 on a stream" {
		t.Fatal(got)
	}
	if got := ErrFrameTooLarge.Error(); got != "h2: connection error FRAME_SIZE_ERROR: frame exceeds SETTINGS_MAX_FRAME_SIZE" {
		t.Fatal(got)
	}
}
