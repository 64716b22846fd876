package grpcserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// FuzzH2Conn feeds a connection of the own transport whatever a client may send after its
// preface, in one read or split in two: the server must not panic nor hang, must give back
// every reservation, and every byte it writes must be HTTP/2 frames x/net's framer reads.
// Seeded with a valid call, one split into CONTINUATION frames, a compressed-flag message, an
// OTEP stream's messages within and across frames, and the frames of the h2spec cases that
// found bugs.
func FuzzH2Conn(f *testing.F) {
	body := traceBody(f, 1, 2)
	msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
	msg = append(msg, body...)
	block := h2.AppendHeaderBlock(nil, h2.GRPCRequestHeaders("http", "otlpgate", tracesPath, "", "fuzz")...)
	settings := appendSettings(nil, false, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	call := func(id uint32, endHeaders bool, frag []byte) []byte {
		fl := http2.Flags(0)
		if endHeaders {
			fl = http2.FlagHeadersEndHeaders
		}
		b := h2.AppendFrameHeader(nil, h2.FrameHeader{Length: uint32(len(frag)), Type: http2.FrameHeaders, Flags: fl, StreamID: id})
		return append(b, frag...)
	}
	valid := append(append(append([]byte(nil), settings...), call(1, true, block)...), appendDataFrame(nil, 1, true, msg)...)
	f.Add(valid, 0)
	cont := append(append([]byte(nil), settings...), call(3, false, block[:5])...)
	cont = append(cont, h2.AppendFrameHeader(nil, h2.FrameHeader{Length: uint32(len(block) - 5), Type: http2.FrameContinuation, Flags: http2.FlagContinuationEndHeaders, StreamID: 3})...)
	cont = append(append(cont, block[5:]...), appendDataFrame(nil, 3, true, msg)...)
	f.Add(cont, 17)
	gz := append([]byte{1}, msg[1:]...)
	f.Add(append(append(append([]byte(nil), settings...), call(1, true, block)...), appendDataFrame(nil, 1, true, gz)...), 3)
	f.Add(append(append([]byte(nil), settings...), appendWindowUpdate(nil, 1, 1)...), 0)
	f.Add(append(append(append([]byte(nil), settings...), call(1, true, block)...), appendRSTStream(nil, 1, http2.ErrCodeCancel)...), 40)
	// An OTEP stream: two messages in one frame, a third split across frames, then its end.
	sblock := h2.AppendHeaderBlock(nil, h2.GRPCRequestHeaders("http", "otlpgate", h2StreamPaths[0], "", "fuzz")...)
	sm := func(id uint64) []byte {
		req := otepReq(f, id, body)
		return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(req))), req...)
	}
	stream := append(append([]byte(nil), settings...), call(1, true, sblock)...)
	stream = appendDataFrame(stream, 1, false, append(sm(1), sm(2)...))
	third := sm(3)
	stream = appendDataFrame(stream, 1, false, third[:7])
	stream = appendDataFrame(stream, 1, true, third[7:])
	f.Add(stream, 60)
	f.Add(append(append(append([]byte(nil), settings...), call(1, true, sblock)...), appendDataFrame(nil, 1, false, sm(4)[:9])...), 0)

	p, err := pipeline.New(testPipelineConfig(), []pipeline.Destination{&testkit.Discard{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(p.Close)
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	s, err := New(sc, p, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.gs.Stop)
	f.Fuzz(func(t *testing.T, in []byte, split int) {
		mc := newMemConn()
		mc.keepLog = true
		c := s.newH2Conn(mc)
		if !s.h2.add(c) {
			t.Fatal("not added")
		}
		done := make(chan struct{})
		go func() { defer close(done); c.serve() }()
		go func() {
			for {
				select {
				case <-mc.wrote:
				case <-done:
					return
				}
			}
		}()
		data := append([]byte(h2.ClientPreface), in...)
		split = len(h2.ClientPreface) + max(split, 0)%(len(in)+1)
		stuck := time.NewTimer(10 * time.Second)
		defer stuck.Stop()
		hung := func(what string) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%s:\n%s", what, buf[:runtime.Stack(buf, true)])
		}
		for _, chunk := range [][]byte{data[:split], data[split:]} {
			select {
			case mc.in <- chunk:
			case <-done:
			case <-stuck.C:
				hung("the connection stopped reading for 10s")
			}
		}
		mc.Close()
		select {
		case <-done:
		case <-stuck.C:
			hung("the connection did not end within 10s")
		}
		if s.adm.Limiter() != nil && s.adm.Limiter().Bytes() != 0 {
			t.Fatalf("%d bytes still reserved", s.adm.Limiter().Bytes())
		}
		fr := http2.NewFramer(nil, bytes.NewReader(mc.log))
		fr.SetMaxReadFrameSize(h2.MaxFrameSizeLimit)
		for {
			if _, err := fr.ReadFrame(); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("the server wrote a frame x/net cannot read: %v", err)
				}
				break
			}
		}
	})
}
