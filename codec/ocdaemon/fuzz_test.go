package ocdaemon

import (
	"bytes"
	"reflect"
	"testing"
)

// rejectUndecodable is the owner's rule in these tests: binary payloads must decode.
func rejectUndecodable(f *Frame) bool {
	var err error
	switch f.Type {
	case ReqInit:
		var m Init
		err = m.Decode(f.Payload)
	case MeasureCreate:
		var m Measure
		err = m.Decode(f.Payload)
	case ViewReportingPeriod:
		_, err = DecodeReportingPeriod(f.Payload)
	case ViewRegister:
		var m Views
		err = m.Decode(f.Payload)
	case ViewUnregister:
		var m Names
		err = m.Decode(f.Payload)
	case StatsRecord:
		var m Record
		err = m.Decode(f.Payload)
	}
	return err != nil
}

// FuzzSplitter checks that framing never depends on how the stream was cut into writes, that
// every frame is as long as its header says, and that nothing panics.
func FuzzSplitter(f *testing.F) {
	for name := range captureFrames {
		data := readCapture(f, name)
		f.Add(data, uint16(7), uint16(1024))
		// Truncate a message in the middle, as the client's send deadline does.
		if len(data) > 100 {
			cut := append(append([]byte(nil), data[:60]...), data[90:]...)
			f.Add(cut, uint16(1), uint16(0))
		}
	}
	f.Add([]byte("\x00\x00\x00\x00\x2c\x01\x01\x00\x00\x00\x80\x3f\x00\x00\x02\x00\x00"), uint16(3), uint16(64))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16, max uint16) {
		whole := split(data, int(max), 0, rejectUndecodable)
		cut := split(data, int(max), int(chunk%512)+1, rejectUndecodable)
		if !reflect.DeepEqual(whole.frames, cut.frames) || !reflect.DeepEqual(whole.payloads, cut.payloads) ||
			whole.discards != cut.discards || whole.skipped != cut.skipped {
			t.Fatalf("chunk %d changed the outcome\nwhole %s\n  cut %s", chunk%512+1, whole, cut)
		}
		// Everything is accounted for: frames, discarded messages or skipped bytes.
		var inFrames int
		for _, p := range whole.payloads {
			inFrames += len(p)
		}
		if inFrames > len(data) {
			t.Fatalf("frames hold %d bytes of %d", inFrames, len(data))
		}
		if len(whole.frames) == 0 && whole.skipped == 0 && whole.discards == [NumReasons]int{} && len(data) > 0 &&
			!bytes.Equal(data, make([]byte, len(data))) {
			t.Fatalf("%d bytes vanished without a count", len(data))
		}
	})
}

// FuzzRecord decodes arbitrary STATS_RECORD payloads; whatever decodes re-encodes to a payload
// that decodes to the same record.
func FuzzRecord(f *testing.F) {
	for _, fr := range framesOf(f, "stats_basic.bin") {
		f.Add(fr.Payload)
	}
	f.Add([]byte{1, 1, 'm', 1, 0xff, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		var r Record
		if r.Decode(p) != nil {
			var v Views
			_ = v.Decode(p)
			var m Measure
			_ = m.Decode(p)
			var n Names
			_ = n.Decode(p)
			return
		}
		var again Record
		if err := again.Decode(AppendRecord(nil, &r)); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if len(again.Measurements) != len(r.Measurements) || len(again.Tags) != len(r.Tags) ||
			len(again.Attachments) != len(r.Attachments) {
			t.Fatalf("re-encoded record differs: %+v vs %+v", again, r)
		}
	})
}
