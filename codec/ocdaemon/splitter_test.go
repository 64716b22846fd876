package ocdaemon

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// got is what one run of the Splitter produced, in stream order.
type got struct {
	frames   []string // "type seq pid hdrLen payloadLen"
	payloads [][]byte
	discards [NumReasons]int
	skipped  int
}

func (g *got) String() string {
	return fmt.Sprintf("frames=%v discards=%v skipped=%d", g.frames, g.discards, g.skipped)
}

// split runs data through a Splitter in writes of chunk bytes (0: all at once). reject decides
// which frames the owner rejects; nil rejects none.
func split(data []byte, max, chunk int, reject func(*Frame) bool) *got {
	g := &got{}
	s := NewSplitter(max)
	s.Discard = func(r Reason) { g.discards[r]++ }
	s.Skip = func(n int) { g.skipped += n }
	if chunk <= 0 {
		chunk = len(data)
	}
	var f Frame
	for off := 0; off < len(data); off += chunk {
		// A fresh copy per write, overwritten afterwards, proves that nothing keeps a reference
		// to the fed bytes.
		in := append([]byte(nil), data[off:min(off+chunk, len(data))]...)
		s.Feed(in)
		for s.Next(&f) {
			if reject != nil && reject(&f) {
				s.Reject()
				continue
			}
			g.frames = append(g.frames, fmt.Sprintf("%s %d %d %d %d", f.Type, f.Seq, f.PID, f.HeaderLen, len(f.Payload)))
			g.payloads = append(g.payloads, append([]byte(nil), f.Payload...))
		}
		for i := range in {
			in[i] = 0xee
		}
	}
	s.Close()
	return g
}

func readCapture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The expected frames are the listings of ../../../shared/testdata/ocdaemon/*.decoded.txt.
var captureFrames = map[string][]string{
	"stats_basic.bin": {
		"req_init 1 31039 19 15",
		"measure_create 2 31039 19 40",
		"measure_create 3 31039 19 36",
		"measure_create 4 31039 19 45",
		"view_reporting_period 5 31039 19 8",
		"view_register 6 31039 20 320",
		"stats_record 7 31039 19 126",
		"stats_record 8 31039 19 52",
		"view_unregister 9 31039 19 46",
		"req_shutdown 10 31039 19 0",
	},
	"trace_export.bin": {
		"req_init 1 31090 19 15",
		"req_shutdown 2 31090 19 0",
		"trace_export 3 31090 20 1492",
	},
	"trace_minimal.bin": {
		"req_init 1 31121 19 15",
		"req_shutdown 2 31121 19 0",
		"trace_export 3 31121 20 391",
	},
	"web_3_requests.bin": func() []string {
		var out []string
		for _, tr := range []int{950, 960, 950} {
			out = append(out,
				"req_init 1 31170 19 15",
				"measure_create 2 31170 19 17",
				"stats_record 3 31170 19 14",
				"req_shutdown 4 31170 19 0",
				fmt.Sprintf("trace_export 5 31170 20 %d", tr))
		}
		return out
	}(),
}

func TestSplitterCaptures(t *testing.T) {
	for name, want := range captureFrames {
		data := readCapture(t, name)
		for _, chunk := range []int{0, 1, 7, 4096} {
			t.Run(fmt.Sprintf("%s/%d", name, chunk), func(t *testing.T) {
				g := split(data, 4<<20, chunk, nil)
				if !reflect.DeepEqual(g.frames, want) {
					t.Fatalf("frames\n got %q\nwant %q", g.frames, want)
				}
				if g.discards != [NumReasons]int{} || g.skipped != 0 {
					t.Fatalf("clean capture: %s", g)
				}
			})
		}
	}
}

func hdr(t Type, seq uint64) Header {
	return Header{Type: t, Seq: seq, PID: 31039, Time: 1795262752.5}
}

func TestSplitterRecovery(t *testing.T) {
	rec := AppendRecord(nil, &Record{Measurements: []Measurement{{Name: []byte("example.com/m"), Type: MeasureInt, Int: 7}}})
	recF := fmt.Sprintf("stats_record 4 31039 19 %d", len(rec))
	shutF := func(seq int) string { return fmt.Sprintf("req_shutdown %d 31039 19 0", seq) }
	json := []byte(`[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"1"}]`)
	recFrame := AppendFrame(nil, hdr(StatsRecord, 4), rec)
	shutdown := AppendFrame(nil, hdr(ReqShutdown, 5), nil)
	// A trace export declaring far more than was written, as in partial_message.bin.
	cutTrace := func(seq uint64) []byte {
		h := hdr(TraceExport, seq)
		h.Len = 100000
		return append(AppendHeader(nil, &h), json[:20]...)
	}
	// A stats record cut after 3 payload bytes: its length swallows the next messages.
	cutRecord := func(seq uint64) []byte {
		return AppendFrame(nil, hdr(StatsRecord, seq), rec)[:len(recFrame)-len(rec)+3]
	}
	undecodable := func(f *Frame) bool {
		if f.Type != StatsRecord {
			return false
		}
		var r Record
		return r.Decode(f.Payload) != nil
	}
	f32 := hdr(ReqShutdown, 9)
	f32.Float32 = true
	hugeTrace, hugeRecord := hdr(TraceExport, 1), hdr(StatsRecord, 2)
	hugeTrace.Len, hugeRecord.Len = 1<<64-1, 1<<63
	hugeTraceBytes, hugeRecordBytes := AppendHeader(nil, &hugeTrace), AppendHeader(nil, &hugeRecord)
	cases := []struct {
		name     string
		stream   []byte
		max      int
		reject   func(*Frame) bool
		frames   []string
		discards [NumReasons]int
		skipped  int
	}{
		{
			name:     "truncated trace export",
			stream:   concat(cutTrace(3), recFrame, shutdown),
			frames:   []string{recF, shutF(5)},
			discards: [NumReasons]int{ReasonTruncated: 1},
		},
		{
			name:     "truncated binary message is rejected and resynchronised",
			stream:   concat(cutRecord(3), recFrame, shutdown, AppendFrame(nil, hdr(ReqShutdown, 6), nil)),
			reject:   undecodable,
			frames:   []string{recF, shutF(5), shutF(6)},
			discards: [NumReasons]int{ReasonUndecodable: 1},
			skipped:  len(cutRecord(3)) - 1, // all but the rejected first byte
		},
		{
			name:    "garbage before and between messages",
			stream:  concat([]byte("garbage\x00\x00x"), recFrame, []byte{0, 0, 0, 0, 0x77}, shutdown),
			frames:  []string{recF, shutF(5)},
			skipped: 10 + 5,
		},
		{
			name:     "declared length over the limit",
			stream:   concat(AppendFrame(nil, hdr(TraceExport, 3), json), recFrame),
			max:      32,
			frames:   []string{recF},
			discards: [NumReasons]int{ReasonTooLarge: 1},
			skipped:  len(AppendFrame(nil, hdr(TraceExport, 3), json)),
		},
		{
			// Only the header arrives: a length near 2^64 (and 2^63, which overflows an int)
			// is refused at the header, nothing is reserved or awaited, and the next message
			// is found right after it.
			name:     "declared length of 2^64-1 and 2^63",
			stream:   concat(hugeTraceBytes, hugeRecordBytes, recFrame),
			frames:   []string{recF},
			discards: [NumReasons]int{ReasonTooLarge: 2},
			skipped:  len(hugeTraceBytes) + len(hugeRecordBytes),
		},
		{
			name:   "float32-padded header",
			stream: concat(AppendFrame(nil, f32, nil), recFrame),
			frames: []string{shutF(9), recF},
		},
		{
			name:     "stream ends inside a message",
			stream:   concat(recFrame, cutTrace(5)),
			frames:   []string{recF},
			discards: [NumReasons]int{ReasonTruncated: 1},
		},
		{
			name:    "stream ends inside a header",
			stream:  concat(recFrame, recFrame[:9]),
			frames:  []string{recF},
			skipped: 0,
			discards: [NumReasons]int{
				ReasonTruncated: 1,
			},
		},
	}
	for _, tc := range cases {
		for _, chunk := range []int{0, 1, 2, 7, 4096} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, chunk), func(t *testing.T) {
				max := tc.max
				if max == 0 {
					max = 1 << 20
				}
				g := split(tc.stream, max, chunk, tc.reject)
				if !reflect.DeepEqual(g.frames, tc.frames) || g.discards != tc.discards || g.skipped != tc.skipped {
					t.Fatalf("\n got %s\nwant frames=%v discards=%v skipped=%d", g, tc.frames, tc.discards, tc.skipped)
				}
			})
		}
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestSplitterPayloadIsContiguousView(t *testing.T) {
	// A frame wholly inside one write is returned as a view of that write, not a copy.
	data := readCapture(t, "stats_basic.bin")
	s := NewSplitter(1 << 20)
	s.Feed(data)
	var f Frame
	if !s.Next(&f) {
		t.Fatal("no frame")
	}
	if &f.Payload[0] != &data[19] {
		t.Fatal("payload of a contiguous frame was copied")
	}
	for s.Next(&f) {
	}
	if s.Buffered() != 0 {
		t.Fatalf("buffered %d after a whole capture", s.Buffered())
	}
	s.Close()
}

func TestHeaderTime(t *testing.T) {
	f := func(h Header, wantNano int64) {
		t.Helper()
		b := AppendHeader(nil, &h)
		var got Header
		n, st := parseHeader(b, 1<<20, &got)
		if st != headerOK || n != len(b) {
			t.Fatalf("parse %x: status %d n %d", b, st, n)
		}
		if got.UnixNano() != wantNano || got.Float32 != h.Float32 {
			t.Fatalf("time %v f32 %v: got %d f32 %v, want %d", h.Time, h.Float32, got.UnixNano(), got.Float32, wantNano)
		}
	}
	f(Header{Type: ReqInit, Seq: 1, PID: 1, Time: 1795262752.647132}, 1795262752647132000)
	// float32 keeps 24 bits: 1795262752 rounds to a multiple of 128 s.
	f(Header{Type: ReqInit, Seq: 1, PID: 1, Time: 1795262752, Float32: true}, 1795262720000000000)
}

func TestParseHeaderRejects(t *testing.T) {
	base := Header{Type: StatsRecord, Seq: 1, PID: 10, Time: 1}
	f := func(name string, mutate func(*Header), want headerStatus) {
		t.Helper()
		h := base
		mutate(&h)
		var got Header
		if _, st := parseHeader(AppendHeader(nil, &h), 100, &got); st != want {
			t.Fatalf("%s: status %d, want %d", name, st, want)
		}
	}
	f("ok", func(h *Header) {}, headerOK)
	f("type", func(h *Header) { h.Type = 0x99 }, headerInvalid)
	f("seq 0", func(h *Header) { h.Seq = 0 }, headerInvalid)
	f("pid 0", func(h *Header) { h.PID = 0 }, headerInvalid)
	f("negative time", func(h *Header) { h.Time = -1 }, headerInvalid)
	f("too large", func(h *Header) { h.Len = 101 }, headerTooLarge)
	var got Header
	if _, st := parseHeader([]byte{0, 0, 0, 0, byte(StatsRecord), 0x80}, 100, &got); st != headerShort {
		t.Fatalf("prefix: status %d", st)
	}
	over := append([]byte{0, 0, 0, 0, byte(StatsRecord)}, bytes.Repeat([]byte{0xff}, 10)...)
	if _, st := parseHeader(append(over, 0x01), 100, &got); st != headerInvalid {
		t.Fatalf("overlong uvarint: status %d", st)
	}
}

func TestCandidate(t *testing.T) {
	f := func(in string, want int) {
		t.Helper()
		if got := candidate([]byte(in)); got != want {
			t.Fatalf("candidate(%q) = %d, want %d", in, got, want)
		}
	}
	f("", 0)
	f("abc", 3)
	f("\x00\x00\x00\x00x", 0)
	f("ab\x00c\x00\x00\x00\x00", 4)
	f("ab\x00\x00", 2)
	f("a\x00\x00\x00b", 5)
	f(strings.Repeat("x", 100)+"\x00", 100)
}

// TestSplitterPos: Pos stays on the first byte of a message that is still incomplete, however
// many reads it takes, and moves past every message handled, skipped or discarded.
func TestSplitterPos(t *testing.T) {
	rec := AppendRecord(nil, &Record{Measurements: []Measurement{{Name: []byte("m"), Type: MeasureInt, Int: 7}}})
	frame := AppendFrame(nil, hdr(StatsRecord, 4), rec)
	garbage := []byte("xyz")
	stream := concat(frame, garbage, frame, frame)
	s := NewSplitter(1 << 20)
	var f Frame
	type step struct {
		upTo     int    // feed the stream up to this offset
		pos      uint64 // Pos once Next returned false
		buffered int
	}
	secondAt := len(frame) + len(garbage)
	thirdAt := secondAt + len(frame)
	off := 0
	for _, st := range []step{
		{upTo: 3, pos: 0, buffered: 3},                                   // inside the first header
		{upTo: len(frame) - 1, pos: 0, buffered: len(frame) - 1},         // one byte short
		{upTo: len(frame) + 1, pos: uint64(len(frame) + 1), buffered: 0}, // garbage is skipped
		{upTo: secondAt + 5, pos: uint64(secondAt), buffered: 5},
		{upTo: thirdAt + 2, pos: uint64(thirdAt), buffered: 2}, // the second is done, the third begun
		{upTo: len(stream), pos: uint64(len(stream)), buffered: 0},
	} {
		s.Feed(stream[off:st.upTo])
		off = st.upTo
		for s.Next(&f) {
		}
		if s.Pos() != st.pos || s.Buffered() != st.buffered {
			t.Fatalf("after %d bytes: pos %d buffered %d, want %d and %d", st.upTo, s.Pos(), s.Buffered(), st.pos, st.buffered)
		}
	}
	s.Close()
}
