package ocdaemon

import "testing"

func BenchmarkSplitter(b *testing.B) {
	data := readCapture(b, "web_3_requests.bin")
	s := NewSplitter(4 << 20)
	var f Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		s.Feed(data)
		for s.Next(&f) {
		}
	}
}

func BenchmarkRecordDecode(b *testing.B) {
	var p []byte
	for _, fr := range framesOf(b, "stats_basic.bin") {
		if fr.Type == StatsRecord {
			p = fr.Payload
			break
		}
	}
	var r Record
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if err := r.Decode(p); err != nil {
			b.Fatal(err)
		}
	}
}
