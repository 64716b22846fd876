package ocdaemon

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// framesOf returns the frames of a clean capture, payloads copied.
func framesOf(t testing.TB, name string) []Frame {
	t.Helper()
	s := NewSplitter(4 << 20)
	s.Feed(readCapture(t, name))
	var out []Frame
	var f Frame
	for s.Next(&f) {
		f.Payload = append([]byte(nil), f.Payload...)
		out = append(out, f)
	}
	s.Close()
	return out
}

func str(bs [][]byte) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("%q", b))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func tags(ts []Tag) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, string(t.Key)+"="+string(t.Value))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// describe renders a payload in the notation of the capture listings (*.decoded.txt).
func describe(t *testing.T, f *Frame) string {
	t.Helper()
	switch f.Type {
	case ReqInit:
		var m Init
		if err := m.Decode(f.Payload); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("protocolVersion=%d phpVersion=%q zendVersion=%q", m.ProtocolVersion, m.PHPVersion, m.ZendVersion)
	case MeasureCreate:
		var m Measure
		if err := m.Decode(f.Payload); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("measureType=%d name=%q desc=%q unit=%q", m.Type, m.Name, m.Description, m.Unit)
	case ViewReportingPeriod:
		v, err := DecodeReportingPeriod(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("interval=%v s", v)
	case ViewRegister:
		var m Views
		if err := m.Decode(f.Payload); err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprintf("%d views", len(m.Views))
		for _, v := range m.Views {
			out += fmt.Sprintf("\nview name=%q desc=%q tagKeys=%s measure=%q agg=%d bounds=%v",
				v.Name, v.Description, str(v.TagKeys), v.Measure, v.Aggregation, v.Bounds)
		}
		return out
	case StatsRecord:
		var m Record
		if err := m.Decode(f.Payload); err != nil {
			t.Fatal(err)
		}
		var out string
		for _, ms := range m.Measurements {
			switch ms.Type {
			case MeasureInt:
				out += fmt.Sprintf("measurement %q int uvarint=%d\n", ms.Name, ms.Int)
			case MeasureFloat:
				out += fmt.Sprintf("measurement %q float=%v\n", ms.Name, ms.Float)
			}
		}
		return out + fmt.Sprintf("tags=%s attachments=%s", tags(m.Tags), tags(m.Attachments))
	case ViewUnregister:
		var m Names
		if err := m.Decode(f.Payload); err != nil {
			t.Fatal(err)
		}
		return "unregister " + str(m.Names)
	}
	return fmt.Sprintf("(payload %d bytes)", len(f.Payload))
}

func TestDecodeStatsBasic(t *testing.T) {
	frames := framesOf(t, "stats_basic.bin")
	var got []string
	for i := range frames {
		got = append(got, describe(t, &frames[i]))
	}
	want := []string{
		`protocolVersion=1 phpVersion="8.2.36" zendVersion="4.2.36"`,
		`measureType=2 name="example.com/latency" desc="request latency" unit="ms"`,
		`measureType=1 name="example.com/bytes" desc="response size" unit="By"`,
		`measureType=1 name="example.com/requests" desc="example.com/requests" unit="1"`,
		`interval=2.5 s`,
		`4 views` +
			"\n" + `view name="example.com/requests_count" desc="number of requests" tagKeys=["method"] measure="example.com/requests" agg=1 bounds=[]` +
			"\n" + `view name="example.com/bytes_sum" desc="total bytes" tagKeys=["method" "status"] measure="example.com/bytes" agg=2 bounds=[]` +
			"\n" + `view name="example.com/latency_dist" desc="latency distribution" tagKeys=["status" "method"] measure="example.com/latency" agg=3 bounds=[0 25.5 50 100 1000]` +
			"\n" + `view name="example.com/bytes" desc="response size" tagKeys=[] measure="example.com/bytes" agg=4 bounds=[]`,
		`measurement "example.com/latency" float=12.75` + "\n" +
			`measurement "example.com/bytes" int uvarint=1536` + "\n" +
			`measurement "example.com/requests" int uvarint=1` + "\n" +
			`tags=[method=GET, status=200] attachments=[trace_id=abc123, span_id=def]`,
		`measurement "example.com/latency" float=300` + "\n" +
			`measurement "example.com/bytes" int uvarint=0` + "\n" +
			`tags=[] attachments=[]`,
		`unregister ["example.com/bytes" "example.com/requests_count"]`,
		`(payload 0 bytes)`,
	}
	if !reflect.DeepEqual(got, want) {
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("message %d\n got %s\nwant %s", i, g, w)
			}
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	valid := AppendRecord(nil, &Record{
		Measurements: []Measurement{{Name: []byte("m"), Type: MeasureInt, Int: 5}},
		Tags:         []Tag{{Key: []byte("k"), Value: []byte("v")}},
	})
	f := func(name string, p []byte) {
		t.Helper()
		var r Record
		if err := r.Decode(p); err == nil {
			t.Errorf("%s: decoded %x", name, p)
		}
	}
	var r Record
	if err := r.Decode(valid); err != nil {
		t.Fatal(err)
	}
	f("empty", nil)
	f("cut", valid[:len(valid)-1])
	f("trailing", append(append([]byte(nil), valid...), 0))
	f("bad measure type", []byte{1, 1, 'm', 7, 0, 0, 0})
	f("huge count", []byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	// The client encodes -1 as the lone byte 0xff: the uvarint swallows the tag count.
	f("negative int", []byte{1, 1, 'm', 1, 0xff, 0, 0})

	var v Views
	if err := v.Decode([]byte{1, 1, 'v', 0, 0, 1, 'm', 9}); err == nil {
		t.Error("unknown aggregation decoded")
	}
	var m Measure
	if err := m.Decode([]byte{3, 1, 'm', 0, 0}); err == nil {
		t.Error("unknown measure type decoded")
	}
}

func TestRoundTrip(t *testing.T) {
	rec := Record{
		Measurements: []Measurement{
			{Name: []byte("a"), Type: MeasureInt, Int: 1 << 40},
			{Name: []byte("b"), Type: MeasureFloat, Float: -2.5},
			{Name: []byte("c"), Type: MeasureUnknown},
		},
		Tags:        []Tag{{Key: []byte("k"), Value: []byte("")}},
		Attachments: []Tag{{Key: []byte("trace_id"), Value: []byte("abc")}},
	}
	var got Record
	if err := got.Decode(AppendRecord(nil, &rec)); err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("record: %v\n got %+v\nwant %+v", err, got, rec)
	}
	views := []View{{
		Name: []byte("v"), Description: []byte("d"), TagKeys: [][]byte{[]byte("k1"), []byte("k2")},
		Measure: []byte("m"), Aggregation: AggregationDistribution, Bounds: []float64{1, 2.5},
	}, {
		Name: []byte("w"), Description: []byte{}, Measure: []byte("m"),
		Aggregation: AggregationCount,
	}}
	var gv Views
	// Decode twice into the same value: the second run reuses the capacity of the first.
	for range 2 {
		if err := gv.Decode(AppendViews(nil, views)); err != nil || !reflect.DeepEqual(gv.Views, views) {
			t.Fatalf("views: %v\n got %+v\nwant %+v", err, gv.Views, views)
		}
	}
	p, err := DecodeReportingPeriod(AppendReportingPeriod(nil, 2.5))
	if err != nil || p != 2.5 {
		t.Fatalf("period %v %v", p, err)
	}
	var n Names
	if err := n.Decode(AppendNames(nil, [][]byte{[]byte("x"), []byte("y")})); err != nil || str(n.Names) != `["x" "y"]` {
		t.Fatalf("names %v %s", err, str(n.Names))
	}
}
