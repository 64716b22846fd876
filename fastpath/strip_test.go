package fastpath_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

func TestTopLevel(t *testing.T) {
	b := cat(varintField(1, 300), msg(2, []byte("ab")), fixed64Field(9, 7), tag(3, protowire.Fixed32Type), []byte{1, 2, 3, 4},
		[]byte{0x8a, 0x00, 0x01, 'z'}) // field 1 bytes, tag spelled in two bytes
	want := []fastpath.Field{
		{Num: 1, Type: protowire.VarintType, Tag: 0, After: 1, Value: 1, End: 3, Varint: 300},
		{Num: 2, Type: protowire.BytesType, Tag: 3, After: 4, Value: 5, End: 7},
		{Num: 9, Type: protowire.Fixed64Type, Tag: 7, After: 8, Value: 8, End: 16},
		{Num: 3, Type: protowire.Fixed32Type, Tag: 16, After: 17, Value: 17, End: 21},
		{Num: 1, Type: protowire.BytesType, Tag: 21, After: 23, Value: 24, End: 25},
	}
	var got []fastpath.Field
	it := fastpath.NewTopLevel(b)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		got = append(got, f)
	}
	if it.Err() != nil || fmt.Sprint(got) != fmt.Sprint(want) || it.Offset() != len(b) {
		t.Fatalf("got %+v, %v at %d; want %+v", got, it.Err(), it.Offset(), want)
	}
	if got[4].TagLen() != 2 || got[0].TagLen() != 1 {
		t.Fatalf("TagLen %d, %d", got[4].TagLen(), got[0].TagLen())
	}

	bad := []struct {
		name string
		b    []byte
		err  error
		ok   int // fields returned before the error
	}{
		{"truncated tag", cat(msg(1), []byte{0x80}), fastpath.ErrTruncated, 1},
		{"field 0", []byte{0x00}, fastpath.ErrFieldNumber, 0},
		{"length past end", []byte{0x0a, 0x03, 0}, fastpath.ErrLengthOverflow, 0},
		{"group", cat(msg(1), tag(5, protowire.StartGroupType)), fastpath.ErrGroup, 1},
		{"truncated varint", []byte{0x08, 0x80}, fastpath.ErrTruncated, 0},
		{"varint overflow", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, fastpath.ErrVarintOverflow, 0},
		{"truncated fixed32", []byte{0x1d, 1, 2}, fastpath.ErrTruncated, 0},
	}
	for _, tt := range bad {
		it := fastpath.NewTopLevel(tt.b)
		n := 0
		for _, ok := it.Next(); ok; _, ok = it.Next() {
			n++
		}
		if n != tt.ok || !errors.Is(it.Err(), tt.err) {
			t.Errorf("%s: %d fields, %v; want %d, %v", tt.name, n, it.Err(), tt.ok, tt.err)
		}
		if _, ok := it.Next(); ok {
			t.Errorf("%s: Next after an error returned a field", tt.name)
		}
	}
}

// AppendEntries keeps exactly the resource entries, in order, and reports what it left out.
func TestAppendEntriesStrips(t *testing.T) {
	e1, e2 := msg(1, []byte("one")), msg(1, []byte("two"))
	o1, o2 := msg(2, []byte("one")), msg(2, []byte("two"))
	odd := [][]byte{
		{0x12, 0x00},                   // field 2, empty bytes (OTEP's entry field, in a v1 request)
		varintField(5, 7),              // field 5, varint
		fixed64Field(9, 1),             // field 9, fixed64
		{0x3d, 1, 2, 3, 4},             // field 7, fixed32
		msg(15, []byte("abc")),         // field 15, bytes
		msg(100000, []byte("x")),       // a field number with a three-byte tag
		varintField(2, 1),              // field 2 as a varint
		protowire.AppendTag(nil, 3, 0)} // ... and a zero varint below
	odd[len(odd)-1] = append(odd[len(odd)-1], 0)
	tests := []struct {
		name   string
		layout fastpath.Layout
		in     []byte
		want   []byte
		id     uint64
		fields int
	}{
		{"v1 clean", fastpath.LayoutV1, cat(e1, e2), cat(e1, e2), 0, 0},
		{"v1 empty", fastpath.LayoutV1, nil, nil, 0, 0},
		{"v1 trailing field 2", fastpath.LayoutV1, cat(e1, e2, odd[0]), cat(e1, e2), 0, 1},
		{"v1 leading", fastpath.LayoutV1, cat(odd[1], e1, e2), cat(e1, e2), 0, 1},
		{"v1 between and around", fastpath.LayoutV1, cat(odd[2], e1, odd[3], odd[4], e2, odd[5], odd[6], odd[7]), cat(e1, e2), 0, 6},
		{"v1 only odd", fastpath.LayoutV1, cat(odd...), nil, 0, len(odd)},
		{"otep clean", fastpath.LayoutOTEP, cat(varintField(1, 9), o1, o2), cat(e1, e2), 9, 0},
		{"otep id last", fastpath.LayoutOTEP, cat(o1, o2, varintField(1, 9)), cat(e1, e2), 9, 0},
		{"otep odd everywhere", fastpath.LayoutOTEP, cat(odd[1], varintField(1, 9), odd[2], o1, odd[4], o2, odd[5]), cat(e1, e2), 9, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("prefix")
			got, id, st, err := fastpath.AppendEntries(dst, tt.in, tt.layout)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, cat([]byte("prefix"), tt.want)) || id != tt.id {
				t.Fatalf("got %x id %d, want %x id %d", got, id, tt.want, tt.id)
			}
			wantBytes := len(tt.in) - len(tt.want)
			if tt.layout == fastpath.LayoutOTEP {
				wantBytes -= len(varintField(1, tt.id))
			}
			if st != (fastpath.Stripped{Fields: tt.fields, Bytes: wantBytes}) {
				t.Fatalf("stripped %+v, want %d fields, %d bytes", st, tt.fields, wantBytes)
			}
			// Entries hands out the request itself exactly when AppendEntries would copy it
			// unchanged: a v1 request with nothing to strip.
			cfg := pipeline.DefaultConfig()
			r, err := pipeline.Prepare(&cfg, nil, nil, &pipeline.Request{Signal: fastpath.Traces, Body: tt.in, Items: 1, Layout: tt.layout})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			rec, ok := r.Entries()
			if wantOK := tt.layout == fastpath.LayoutV1 && tt.fields == 0; ok != wantOK {
				t.Fatalf("Entries: %v, want %v", ok, wantOK)
			}
			if ok && (!bytes.Equal(rec, tt.want) || len(rec) > 0 && &rec[0] != &tt.in[0]) {
				t.Fatalf("Entries: %x, want the request itself, %x", rec, tt.want)
			}
		})
	}
}

// malformedTops are requests whose top level does not hold together, in either layout.
func malformedTops() map[string][]byte {
	return map[string][]byte{
		"truncated tag":       cat(msg(1), msg(2), []byte{0x80}),
		"field number 0":      cat(msg(1), []byte{0x00, 0x00}),
		"entry past the end":  cat(msg(1), msg(2), []byte{0x0a, 0x05, 0}),
		"unknown past end":    cat(msg(1), msg(2), []byte{0x3a, 0x05, 0}),
		"group":               cat(msg(1), msg(2), tag(5, protowire.StartGroupType)),
		"truncated varint":    cat(msg(1), msg(2), []byte{0x28, 0x80}),
		"truncated fixed64":   cat(msg(1), msg(2), []byte{0x49, 1, 2, 3}),
		"entry as varint":     cat(varintField(1, 1), varintField(2, 1)),
		"entry as fixed32":    cat(tag(1, protowire.Fixed32Type), []byte{1, 2, 3, 4}, tag(2, protowire.Fixed32Type), []byte{1, 2, 3, 4}),
		"varint overflow":     cat(msg(1), msg(2), []byte{0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}),
		"field number 2^29+1": cat(msg(1), msg(2), protowire.AppendVarint(nil, uint64(1<<29+1)<<3)),
	}
}

// A request whose top level is malformed is refused at every scan depth, in both layouts and for
// every signal, and the pipeline refuses it too (for intakes that do not scan): it never joins
// a batch.
func TestMalformedTopLevelRefusedEverywhere(t *testing.T) {
	r := testkit.NewRecorder("batch_recorder")
	cfg := pipeline.DefaultConfig()
	cfg.BatchMaxAge = time.Hour
	p, err := pipeline.New(cfg, []pipeline.Destination{r})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for name, b := range malformedTops() {
		for sig := range fastpath.NumSignals {
			for _, layout := range []fastpath.Layout{fastpath.LayoutV1, fastpath.LayoutOTEP} {
				for _, depth := range []fastpath.Depth{fastpath.DepthTop, fastpath.DepthResource, fastpath.DepthFull} {
					if s, err := fastpath.ScanRequest(sig, b, layout, depth); err == nil {
						t.Errorf("%s: %v %v %v: ScanRequest accepted it: %+v", name, sig, layout, depth, s)
					}
				}
				if _, _, _, err := fastpath.AppendEntries(nil, b, layout); err == nil {
					t.Errorf("%s: %v %v: AppendEntries accepted it", name, sig, layout)
				}
				if _, err := p.Admit(pipeline.Request{Signal: sig, Body: b, Items: 1, Layout: layout}); err == nil {
					t.Errorf("%s: %v %v: the pipeline admitted it", name, sig, layout)
					p.Flush()
				}
			}
		}
	}
	p.Flush()
	if got := r.Received(); len(got) != 0 {
		t.Fatalf("%d batches sealed from malformed requests", len(got))
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("%d bytes still charged to the budget", q)
	}
}

// oddTails are top-level fields a buggy client or a newer schema may append to a request.
func oddTails() [][]byte {
	return [][]byte{
		{0x12, 0x00},                        // field 2, empty bytes
		varintField(5, 7),                   // field 5, varint
		fixed64Field(6, 1),                  // field 6, fixed64
		{0x3d, 1, 2, 3, 4},                  // field 7, fixed32
		msg(15, []byte("future")),           // field 15, bytes
		msg(1<<20, []byte("far")),           // a four-byte tag
		cat(varintField(2, 1), msg(3, nil)), // two at once
	}
}

// Invariant: no batch holds bytes a destination refuses for the batch as a whole. For every
// signal and both intake layouts, requests with odd top-level fields are mixed with clean ones;
// every request the scan accepts (at every depth) is admitted, and every sealed batch is a v1
// body of resource entries only: it converts to OTEP (what the client's framing checks, see
// client.TestBatchesFrame), scans at full depth, and holds exactly the entries sent, in order.
func TestBatchesHoldOnlyEntries(t *testing.T) {
	fxs := fixtures(t)
	for sig := range fastpath.NumSignals {
		for _, layout := range []fastpath.Layout{fastpath.LayoutV1, fastpath.LayoutOTEP} {
			for _, depth := range []fastpath.Depth{fastpath.DepthTop, fastpath.DepthResource, fastpath.DepthFull} {
				t.Run(fmt.Sprintf("%v/%v/%v", sig, layout, depth), func(t *testing.T) {
					r := testkit.NewRecorder("batch_recorder")
					cfg := pipeline.DefaultConfig()
					cfg.BatchMaxAge = time.Hour
					cfg.Eager = false
					cfg.BatchMaxItems = 1 << 20
					p, err := pipeline.New(cfg, []pipeline.Destination{r})
					if err != nil {
						t.Fatal(err)
					}
					defer p.Close()
					var want []byte // the entries, as a v1 body
					tails := oddTails()
					id := uint64(0)
					for i, fx := range fxs {
						if fx.sig != sig {
							continue
						}
						for j, tail := range append([][]byte{nil}, tails...) {
							if layout == fastpath.LayoutOTEP && len(tail) > 0 && tail[0]>>3 == 2 {
								continue // field 2 holds entries in OTEP: not an odd field there
							}
							v1 := cat(fx.v1, tail)
							if j%2 == 1 { // some in front, some behind
								v1 = cat(tail, fx.v1)
							}
							req := v1
							if layout == fastpath.LayoutOTEP {
								id++
								// AppendOTEP refuses a v1 field 2; an OTEP client may still
								// send any unknown field: re-tag the entries by hand.
								req = toOTEPKeepingUnknown(id, v1)
							}
							sc, err := fastpath.ScanRequest(sig, req, layout, depth)
							if err != nil {
								t.Fatalf("fixture %d tail %d: scan refused a well-formed request: %v", i, j, err)
							}
							if _, err := p.Admit(pipeline.Request{Signal: sig, Body: req, Items: max(sc.Items, 0), Layout: layout}); err != nil {
								t.Fatalf("fixture %d tail %d: %v", i, j, err)
							}
							want = append(want, fx.v1...)
						}
					}
					p.Flush()
					var got []byte
					for _, b := range r.Received() {
						checkBatchable(t, sig, b.Body)
						got = append(got, b.Body...)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("batches hold %d bytes, want exactly the %d bytes of the entries sent", len(got), len(want))
					}
				})
			}
		}
	}
}

// toOTEPKeepingUnknown re-tags the field-1 entries of v1 to field 2, puts the id in front and
// carries every other field over, field 2 included.
func toOTEPKeepingUnknown(id uint64, v1 []byte) []byte {
	out := varintField(1, id)
	for it := fastpath.NewTopLevel(v1); ; {
		f, ok := it.Next()
		if !ok {
			return out
		}
		if f.Num == 1 {
			out = append(out, 0x12)
			out = append(out, v1[f.After:f.End]...)
			continue
		}
		out = append(out, v1[f.Tag:f.End]...)
	}
}

// checkBatchable fails unless body is a v1 body of resource entries only, that a full scan and
// the OTEP conversion accept.
func checkBatchable(t *testing.T, sig fastpath.Signal, body []byte) {
	t.Helper()
	it := fastpath.NewTopLevel(body)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num != 1 || f.Type != protowire.BytesType {
			t.Fatalf("batch holds top-level field %d (wire type %d)", f.Num, f.Type)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatalf("batch top level: %v", err)
	}
	if _, err := fastpath.ScanRequest(sig, body, fastpath.LayoutV1, fastpath.DepthFull); err != nil {
		t.Fatalf("batch does not scan: %v", err)
	}
	if _, err := fastpath.AppendOTEP(nil, 1, body); err != nil {
		t.Fatalf("batch does not convert to OTEP: %v", err)
	}
}

// FuzzAppendEntries: admission's copy refuses exactly what a top-level scan refuses, and what
// it produces is a batchable v1 body holding the request's entries.
func FuzzAppendEntries(f *testing.F) {
	for _, fx := range fuzzFixtures(f) {
		f.Add(fx.v1)
		f.Add(cat(fx.v1, []byte{0x12, 0x00}))
		f.Add(otepMarshal(f, fx.sig, 3, fx.v1))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, layout := range layouts {
			sc, scanErr := fastpath.ScanRequest(fastpath.Traces, b, layout, fastpath.DepthTop)
			out, id, st, err := fastpath.AppendEntries(nil, b, layout)
			if (err == nil) != (scanErr == nil) {
				t.Fatalf("%v: AppendEntries %v, ScanRequest %v", layout, err, scanErr)
			}
			if err != nil {
				continue
			}
			if id != sc.ID || len(out) > len(b) || st.Bytes > len(b)-len(out) {
				t.Fatalf("%v: id %d (scan %d), %d bytes from %d, stripped %+v", layout, id, sc.ID, len(out), len(b), st)
			}
			again, err := fastpath.ScanRequest(fastpath.Traces, out, fastpath.LayoutV1, fastpath.DepthTop)
			if err != nil || again.Resources != sc.Resources {
				t.Fatalf("%v: the copy scans as %+v, %v; the request had %d entries", layout, again, err, sc.Resources)
			}
			it := fastpath.NewTopLevel(out)
			for f, ok := it.Next(); ok; f, ok = it.Next() {
				if f.Num != 1 {
					t.Fatalf("%v: the copy holds field %d", layout, f.Num)
				}
			}
			if _, err := fastpath.AppendOTEP(nil, 1, out); err != nil {
				t.Fatalf("%v: the copy does not convert to OTEP: %v", layout, err)
			}
		}
	})
}
