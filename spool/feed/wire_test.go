package feed

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/internal/ziptest"
	"github.com/otlpgate/otlpgate/spool"
)

// wireDest is dest sending pass-through batches in enc (pipeline.WireEncoder), as a client.Dest
// with protocol http or v1 and that compression does.
type wireDest struct {
	*dest
	enc pipeline.Encoding
}

func (d wireDest) PassThrough() pipeline.Encoding { return d.enc }

// wireSpool opens a spool taking compressed records, read by destinations d and e, and by the
// test as x.
func wireSpool(t *testing.T) *spool.Spool {
	t.Helper()
	return openSpool(t, spool.NewCrashFS(), func(c *spool.Config) {
		c.SegmentBytes, c.MaxBytes, c.Encoded = 64<<10, 4<<20, true
	}, "d", "e", "x")
}

// inflateAll inflates a pass-through batch's bytes as an upstream does: concatenated gzip
// members, or zstd frames with skippable frames among them.
func inflateAll(t *testing.T, enc pipeline.Encoding, p []byte) []byte {
	t.Helper()
	var r io.Reader
	switch enc {
	case pipeline.EncodingGzip:
		zr, err := gzip.NewReader(bytes.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case pipeline.EncodingZstd:
		zr, err := zstd.NewReader(bytes.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	default:
		return p
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Requests that arrived compressed are spooled as they arrived when every destination sends
// their encoding, and plain otherwise. A feeder whose destination sends that encoding hands the
// records on as they are, concatenated into pass-through batches limited by their inflated
// size; a feeder whose destination does not inflates them. Both deliver the exact requests, in
// order, and the counters say which way each went.
func TestWireRecordsThroughTheSpool(t *testing.T) {
	for _, enc := range []pipeline.Encoding{pipeline.EncodingGzip, pipeline.EncodingZstd} {
		t.Run(enc.String(), func(t *testing.T) {
			s := wireSpool(t)
			defer s.Close()
			a := newAdmission(t, admissionConfig(), s)
			d, e := wireDest{newDest(), enc}, newDest()
			// Until the gateway says what the destinations send, nothing is kept compressed.
			compress := func(b []byte) []byte {
				if enc == pipeline.EncodingGzip {
					return ziptest.Gzip(t, b)
				}
				return ziptest.Zstd(t, nil, b)
			}
			var plains [][]byte
			admit := func(fill byte) {
				t.Helper()
				body := entry(300, fill) // 303 bytes: three to a batch of at most 1000
				plains = append(plains, body)
				if _, err := a.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1, Wire: compress(body), Encoding: enc}); err != nil {
					t.Fatal(err)
				}
			}
			fellBack := testkit.Counter(t, "otlpgate_fastpath_passthrough_fallback_requests_total", "reason", "destinations")
			admit(0)
			if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_fallback_requests_total", "reason", "destinations") - fellBack; n != 1 {
				t.Fatalf("fallbacks before SetDestinations: %v, want 1", n)
			}
			a.SetDestinations([]pipeline.Destination{d, wireDest{e, enc}})
			passed := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed")
			var wires [][]byte
			for i := range 5 {
				body := entry(300, byte(1+i))
				plains = append(plains, body)
				w := compress(body)
				wires = append(wires, w)
				if _, err := a.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1, Wire: w, Encoding: enc}); err != nil {
					t.Fatal(err)
				}
			}
			if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed") - passed; n != 5 {
				t.Fatalf("%v requests kept compressed, want 5", n)
			}
			recs, es := spooledFor(t, s, "x")
			if len(es) != 6 || es[0].Encoding != 0 || !bytes.Equal(recs[0], plains[0]) {
				t.Fatalf("spooled %d records, the first %+v", len(es), es[0])
			}
			for i, e := range es[1:] {
				want := wires[i]
				if enc == pipeline.EncodingZstd {
					want = append(pipeline.ZstdPreamble[:], want...)
				}
				if e.Encoding != uint8(enc) || e.Plain != len(plains[i+1]) || e.Size != len(want) || !bytes.Equal(recs[i+1], want) {
					t.Fatalf("record %d: %+v, want %s as received, inflating to %d", i+1, e, enc, len(plains[i+1]))
				}
			}

			// The destination sending enc: the plain record alone, then the compressed ones
			// three and two by their inflated size, each batch their bytes as spooled.
			defer startFeeder(t, s, "d", d).Stop()
			bs := d.take(t, 3)
			if bs[0].Encoding != pipeline.EncodingNone || !bytes.Equal(bs[0].Payload.Bytes(), plains[0]) {
				t.Fatalf("first batch %s, %d bytes", bs[0].Encoding, bs[0].Len())
			}
			for i, b := range bs[1:] {
				from, to := 1+3*i, min(4+3*i, 6)
				var want, plain []byte
				for j := from; j < to; j++ {
					if enc == pipeline.EncodingZstd {
						want = append(want, pipeline.ZstdPreamble[:]...)
					}
					want = append(want, wires[j-1]...)
					plain = append(plain, plains[j]...)
				}
				if b.Encoding != enc || b.Items != to-from || b.PlainLen() != len(plain) || !bytes.Equal(b.Payload.Bytes(), want) {
					t.Fatalf("batch %d: %s, %d items, plain %d: not records %d-%d as spooled", i+1, b.Encoding, b.Items, b.PlainLen(), from, to-1)
				}
				if got := inflateAll(t, enc, b.Payload.Bytes()); !bytes.Equal(got, plain) {
					t.Fatalf("batch %d inflates to %d bytes, not the requests", i+1, len(got))
				}
			}

			// The destination that sends no compression as it is: every record inflated,
			// three to a batch.
			inflated := testkit.Counter(t, "otlpgate_spool_inflated_records_total")
			defer startFeeder(t, s, "e", e).Stop()
			got := e.take(t, 2)
			for i, b := range got {
				if b.Encoding != pipeline.EncodingNone || b.Items != 3 || !bytes.Equal(b.Payload.Bytes(), slices.Concat(plains[3*i:3*i+3]...)) {
					t.Fatalf("plain destination's batch %d: %s, %d items, %d bytes", i, b.Encoding, b.Items, b.Len())
				}
			}
			if n := testkit.Counter(t, "otlpgate_spool_inflated_records_total") - inflated; n != 5 {
				t.Fatalf("%v records inflated, want 5", n)
			}
			for _, b := range append(bs, got...) {
				b.Done(true)
			}
		})
	}
}

// A compressed record that does not inflate to the length it was spooled with, or that is no
// valid compressed stream, is dropped as undeliverable by a feeder that must inflate it,
// counted; the records around it are delivered.
func TestFeederDropsRecordsThatDoNotInflate(t *testing.T) {
	s := wireSpool(t)
	defer s.Close()
	body := entry(100, 7)
	good := ziptest.Gzip(t, body)
	for _, r := range []struct {
		plain int
		wire  []byte
	}{{len(body), good}, {len(body) + 1, good}, {len(body) - 1, good}, {len(body), []byte("not gzip at all")}, {len(body), good}} {
		if _, err := s.Append(spool.Record{Signal: uint8(fastpath.Traces), Items: 1, Encoding: uint8(pipeline.EncodingGzip), Plain: uint32(r.plain), Payload: r.wire}); err != nil {
			t.Fatal(err)
		}
	}
	before := dropped(t, "undeliverable")
	d := newDest()
	defer startFeeder(t, s, "d", d).Stop()
	b := d.take(t, 1)[0]
	if b.Encoding != pipeline.EncodingNone || b.Items != 2 || !bytes.Equal(b.Payload.Bytes(), slices.Concat(body, body)) {
		t.Fatalf("batch %s, %d items, %d bytes: want the two good records inflated", b.Encoding, b.Items, b.Len())
	}
	if n := dropped(t, "undeliverable") - before; n != 3 {
		t.Fatalf("%v records dropped, want 3", n)
	}
	b.Done(true)
}

// A spool opened without compressed records (Config.Encoded off) gets the request plain,
// counted as the pass-through being off, whatever the destinations send.
func TestAdmissionWireIntoPlainSpool(t *testing.T) {
	s := testSpool(t, spool.NewCrashFS())
	defer s.Close()
	a := newAdmission(t, admissionConfig(), s)
	a.SetDestinations([]pipeline.Destination{wireDest{newDest(), pipeline.EncodingGzip}})
	body := entry(300, 9)
	off := testkit.Counter(t, "otlpgate_fastpath_passthrough_fallback_requests_total", "reason", "off")
	if _, err := a.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1, Wire: ziptest.Gzip(t, body), Encoding: pipeline.EncodingGzip}); err != nil {
		t.Fatal(err)
	}
	recs, es := spooled(t, s)
	if len(recs) != 1 || es[0].Encoding != 0 || !bytes.Equal(recs[0], body) {
		t.Fatalf("spooled %d records, the first %+v: want the request plain", len(recs), es)
	}
	if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_fallback_requests_total", "reason", "off") - off; n != 1 {
		t.Fatalf("counted %v as off, want 1", n)
	}
}
