package h2

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"golang.org/x/net/http2"
)

// view takes the frame's typed view and returns what it shows, for comparison, or its error.
func view(f Frame) (any, error) {
	switch f.Type {
	case http2.FrameData:
		return f.Data()
	case http2.FrameHeaders:
		return f.Headers()
	case http2.FramePriority:
		return f.Priority()
	case http2.FrameRSTStream:
		return f.RSTStream()
	case http2.FrameSettings:
		s, err := f.Settings(false)
		if err != nil {
			return nil, err
		}
		out := []any{s.Ack}
		for i := range s.Len() {
			out = append(out, s.At(i))
		}
		return out, nil
	case http2.FramePing:
		return f.Ping()
	case http2.FrameGoAway:
		return f.GoAway()
	case http2.FrameWindowUpdate:
		return f.WindowUpdate()
	case http2.FrameContinuation:
		return f.Continuation()
	case http2.FramePushPromise:
		return nil, f.PushPromise()
	}
	return nil, nil
}

// xnetView is the same for x/net's frame, with a SETTINGS frame's values checked as x/net's
// server checks them (Setting.Valid).
func xnetView(f http2.Frame) (any, error) {
	switch f := f.(type) {
	case *http2.DataFrame:
		return Data{StreamID: f.StreamID, Data: f.Data(), EndStream: f.StreamEnded(), FlowLen: f.Length}, nil
	case *http2.HeadersFrame:
		h := Headers{StreamID: f.StreamID, Fragment: f.HeaderBlockFragment(), EndStream: f.StreamEnded(),
			EndHeaders: f.HeadersEnded(), HasPriority: f.HasPriority()}
		if h.HasPriority {
			h.Priority = f.Priority
		}
		return h, nil
	case *http2.PriorityFrame:
		return Priority{StreamID: f.StreamID, Priority: f.PriorityParam}, nil
	case *http2.RSTStreamFrame:
		return RSTStream{StreamID: f.StreamID, Code: f.ErrCode}, nil
	case *http2.SettingsFrame:
		out := []any{f.IsAck()}
		for i := range f.NumSettings() {
			s := f.Setting(i)
			if err := s.Valid(); err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	case *http2.PingFrame:
		return Ping{Ack: f.IsAck(), Data: f.Data}, nil
	case *http2.GoAwayFrame:
		return GoAway{LastStreamID: f.LastStreamID, Code: f.ErrCode, Debug: f.DebugData()}, nil
	case *http2.WindowUpdateFrame:
		return WindowUpdate{StreamID: f.StreamID, Increment: f.Increment}, nil
	case *http2.ContinuationFrame:
		return Continuation{StreamID: f.StreamID, Fragment: f.HeaderBlockFragment(), EndHeaders: f.HeadersEnded()}, nil
	}
	return nil, nil
}

// codeOf returns an error's HTTP/2 code and whether it is a stream error, for this package's
// errors and x/net's.
func codeOf(err error) (http2.ErrCode, bool, bool) {
	var e *Error
	var ce http2.ConnectionError
	var se http2.StreamError
	switch {
	case errors.As(err, &e):
		return e.Code, e.Stream, true
	case errors.Is(err, http2.ErrFrameTooLarge):
		return http2.ErrCodeFrameSize, false, true
	case errors.As(err, &ce):
		return http2.ErrCode(ce), false, true
	case errors.As(err, &se):
		return se.Code, true, true
	}
	return 0, false, false
}

func normalize(v any) any {
	// Empty and nil byte slices read alike.
	switch v := v.(type) {
	case Data:
		if len(v.Data) == 0 {
			v.Data = nil
		}
		return v
	case Headers:
		if len(v.Fragment) == 0 {
			v.Fragment = nil
		}
		return v
	case GoAway:
		if len(v.Debug) == 0 {
			v.Debug = nil
		}
		return v
	case Continuation:
		if len(v.Fragment) == 0 {
			v.Fragment = nil
		}
		return v
	}
	return v
}

// FuzzFramesAgainstXNet reads one frame with NextFrame and its view, and with x/net's Framer,
// and requires the same frame or the same error code and scope.
func FuzzFramesAgainstXNet(f *testing.F) {
	for b := connectionBytes(f); len(b) > 0; {
		_, n, _ := NextFrame(b, DefaultMaxFrameSize)
		f.Add(b[:n])
		b = b[n:]
	}
	for _, b := range [][]byte{
		raw(http2.FrameData, http2.FlagDataPadded, 1, 4, 0, 0, 0),
		raw(http2.FrameHeaders, http2.FlagHeadersPriority|http2.FlagHeadersPadded, 1, 2, 0, 0, 0, 3, 16, 0),
		raw(http2.FramePriority, 0, 1, 0x80, 0, 0, 1, 0),
		raw(http2.FrameSettings, 0, 0, 0, 5, 0, 0, 0x40, 0),
		raw(http2.FrameWindowUpdate, 0, 1, 0, 0, 0, 0),
		raw(0xfa, 0xff, 7, 1, 2, 3),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := NextFrame(b, DefaultMaxFrameSize)
		x := http2.NewFramer(nil, bytes.NewReader(b))
		x.SetMaxReadFrameSize(DefaultMaxFrameSize)
		xf, xerr := x.ReadFrame()
		if err == nil && n == 0 {
			if xerr == nil {
				t.Fatalf("an incomplete frame, which x/net read: %v", xf)
			}
			return
		}
		var got any
		if err == nil {
			got, err = view(fr)
		}
		if err == nil && xerr == nil && !fr.Known() {
			return // ignored by both (x/net may parse a type it knows, PRIORITY_UPDATE)
		}
		if fr.Type == http2.FrameContinuation || fr.Type == http2.FramePushPromise || fr.Type > http2.FrameContinuation {
			// x/net refuses a CONTINUATION that follows no HEADERS (the connection's rule,
			// not this package's), reads a PUSH_PROMISE (refused here) and parses
			// PRIORITY_UPDATE (ignored here).
			if err == nil || xerr == nil {
				return
			}
		}
		var want any
		if xerr == nil {
			want, xerr = xnetView(xf)
		}
		// Where the two part by design. A stream that depends on itself is refused here, as
		// RFC 7540 §5.3.1 asks and h2spec tests, and x/net lets it through; a HEADERS frame
		// whose padding overruns it ends the connection here (its field block cannot be
		// decoded, so the connection's HPACK state is lost), where x/net resets the stream.
		if err == ErrSelfDependency && xerr == nil {
			return
		}
		// SETTINGS_NO_RFC7540_PRIORITIES other than 0 or 1 is refused here (RFC 9218 §2.1);
		// x/net does not check it.
		if err == ErrSettingsBoolean && xerr == nil {
			return
		}
		var se http2.StreamError
		if err == ErrPadding && fr.Type == http2.FrameHeaders && errors.As(xerr, &se) && se.Code == http2.ErrCodeProtocol {
			return
		}
		if (err == nil) != (xerr == nil) {
			t.Fatalf("%x: ours %v %v, x/net %v %v", b, got, err, want, xerr)
		}
		if err != nil {
			c1, s1, ok1 := codeOf(err)
			c2, s2, ok2 := codeOf(xerr)
			if ok1 && !s1 && !ok2 {
				// x/net's reader failed without a code (a field missing from a short
				// payload: io.ErrUnexpectedEOF), which ends the connection; here the same
				// frame is a connection error with its code.
				return
			}
			if fr.Type == http2.FrameSettings && ok1 && ok2 && !s1 && !s2 && len(fr.Payload) > 6 {
				// Several parameters out of bounds: which one each names first differs
				// (x/net checks the first INITIAL_WINDOW_SIZE before the others).
				return
			}
			if ok1 && ok2 && c1 == c2 && s1 && !s2 {
				// A stream error by RFC 9113 (a PRIORITY frame not 5 long, §6.3) that
				// x/net makes a connection error: any endpoint may end the connection.
				return
			}
			if !ok1 || !ok2 || c1 != c2 || s1 != s2 {
				t.Fatalf("%x: ours %v, x/net %v (%T)", b, err, xerr, xerr)
			}
			return
		}
		if !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Fatalf("%x: ours %+v, x/net %+v", b, got, want)
		}
	})
}
