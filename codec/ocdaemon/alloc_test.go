//go:build !race

package ocdaemon

import "testing"

func TestSplitterAllocs(t *testing.T) {
	data := readCapture(t, "web_3_requests.bin")
	s := NewSplitter(4 << 20)
	var f Frame
	allocs := testing.AllocsPerRun(100, func() {
		s.Feed(data)
		for s.Next(&f) {
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per capture", allocs)
	}
}

func TestRecordDecodeAllocs(t *testing.T) {
	var p []byte
	for _, fr := range framesOf(t, "stats_basic.bin") {
		if fr.Type == StatsRecord {
			p = fr.Payload
			break
		}
	}
	var r Record
	allocs := testing.AllocsPerRun(100, func() {
		if err := r.Decode(p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record", allocs)
	}
}
