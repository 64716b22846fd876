package h2

import (
	"testing"

	"golang.org/x/net/http2"
)

// connectionBytes is what a gRPC client's connection carries in its first round trips: its
// SETTINGS, a window update, a call's HEADERS and DATA, a PING, and the acknowledgements.
func connectionBytes(t testing.TB) []byte {
	return framed(t, func(fr *http2.Framer) error {
		steps := []func() error{
			func() error {
				return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20},
					http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: 16 << 10})
			},
			func() error { return fr.WriteWindowUpdate(0, 1<<24) },
			func() error { return fr.WriteSettingsAck() },
			func() error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 90), EndHeaders: true})
			},
			func() error { return fr.WriteData(1, false, make([]byte, 5+4096)) },
			func() error { return fr.WriteDataPadded(1, true, make([]byte, 100), make([]byte, 20)) },
			func() error { return fr.WritePing(false, [8]byte{1}) },
			func() error { return fr.WriteRSTStream(1, http2.ErrCodeCancel) },
			func() error { return fr.WritePriority(3, http2.PriorityParam{StreamDep: 1}) },
			func() error { return fr.WriteContinuation(5, true, make([]byte, 10)) },
			func() error { return fr.WriteGoAway(1, http2.ErrCodeNo, nil) },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return err
			}
		}
		return nil
	})
}

// parseAll splits b into frames and takes each one's typed view, as a connection's reader does.
func parseAll(b []byte) (frames int, err error) {
	for len(b) > 0 {
		f, n, err := NextFrame(b, DefaultMaxFrameSize)
		if err != nil {
			return frames, err
		}
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
			_, err = f.Settings(false)
		case http2.FramePing:
			_, err = f.Ping()
		case http2.FrameGoAway:
			_, err = f.GoAway()
		case http2.FrameWindowUpdate:
			_, err = f.WindowUpdate()
		case http2.FrameContinuation:
			_, err = f.Continuation()
		}
		if err != nil {
			return frames, err
		}
		frames++
		b = b[n:]
	}
	return frames, nil
}

func BenchmarkParseFrames(b *testing.B) {
	data := connectionBytes(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := parseAll(data); err != nil {
			b.Fatal(err)
		}
	}
}
