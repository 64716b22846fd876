package pipeline

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// wireSink finishes every batch at once; it sends pass-through batches of enc.
type wireSink struct{ enc Encoding }

func (wireSink) Name() string            { return "wire-sink" }
func (s wireSink) PassThrough() Encoding { return s.enc }
func (wireSink) Enqueue(b *Batch) error  { b.Done(true); return nil }
func (w *wireRec) PassThrough() Encoding { return w.enc }
func (w *wireRec) Name() string          { return w.recorder.Name() }
func (w *wireRec) Enqueue(b *Batch) error {
	w.mu2.Lock()
	w.encs = append(w.encs, b.Encoding)
	w.plains = append(w.plains, b.PlainLen())
	w.mu2.Unlock()
	return w.recorder.Enqueue(b)
}
func gzipped(t testing.TB, body []byte) []byte { return compressTo(t, EncodingGzip, body) }

// wireRec is a recorder that sends pass-through batches of enc and notes each batch's
// encoding and decompressed size, in the order of recorder.got when batches are sealed on one
// goroutine (else read recorded.enc).
type wireRec struct {
	recorder
	enc    Encoding
	mu2    sync.Mutex
	encs   []Encoding
	plains []int
}

func compressTo(t testing.TB, enc Encoding, body []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	switch enc {
	case EncodingGzip:
		w := gzip.NewWriter(&b)
		w.Write(body)
		w.Close()
	case EncodingZstd:
		w, err := zstd.NewWriter(&b, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(body)
		w.Close()
	}
	return b.Bytes()
}

// A compressed request joins a pass-through batch only when nothing would rewrite it and every
// destination sends its encoding; otherwise its decompressed body is batched as usual, and the
// reason is counted.
func TestPassThroughFallbacks(t *testing.T) {
	body := entry(2000, 3)
	odd := append([]byte{0x12, 0x01, 0x07}, body...) // field 2 before the entry: stripped
	f := func(name string, cfg Config, dests []Destination, req []byte, enc Encoding, why Fallback, wantWire bool) {
		t.Run(name, func(t *testing.T) {
			p := newTestPipeline(t, cfg, dests...)
			before := testutil.ToFloat64(passFallbackC[why])
			wire := compressTo(t, enc, req)
			if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: req, Items: 1, Wire: wire, Encoding: enc}); err != nil {
				t.Fatal(err)
			}
			p.Flush()
			w := dests[0].(*wireRec)
			got := w.batches()
			if len(got) != 1 || len(w.encs) != 1 {
				t.Fatalf("%d batches, want 1", len(got))
			}
			if wantWire {
				want := wire
				if enc == EncodingZstd {
					want = append(append([]byte(nil), ZstdPreamble[:]...), wire...)
				}
				if w.encs[0] != enc || !bytes.Equal(got[0].body, want) || w.plains[0] != len(req) {
					t.Fatalf("batch %v of %d bytes (%d decompressed), want the %s request as received", w.encs[0], len(got[0].body), w.plains[0], enc)
				}
				return
			}
			if w.encs[0] != EncodingNone || !bytes.Equal(got[0].body, body) {
				t.Fatalf("batch %v of %d bytes, want the plain entries", w.encs[0], len(got[0].body))
			}
			if d := testutil.ToFloat64(passFallbackC[why]) - before; d != 1 {
				t.Fatalf("fallback %s counted %v times, want 1", fallbackNames[why], d)
			}
		})
	}
	gz := func() []Destination {
		return []Destination{&wireRec{recorder: recorder{name: "a", ok: true}, enc: EncodingGzip}}
	}
	cfg := testConfig()
	f("gzip", cfg, gz(), body, EncodingGzip, 0, true)
	f("zstd", cfg, []Destination{&wireRec{recorder: recorder{name: "a", ok: true}, enc: EncodingZstd}}, body, EncodingZstd, 0, true)
	f("stripped-field", cfg, gz(), odd, EncodingGzip, FallbackFields, false)
	f("other-encoding", cfg, gz(), body, EncodingZstd, FallbackDestinations, false)
	f("plain-destination", cfg, append(gz(), &recorder{name: "b", ok: true}), body, EncodingGzip, FallbackDestinations, false)
	off := testConfig()
	off.PassThrough = false
	f("off", off, gz(), body, EncodingGzip, FallbackOff, false)
	proc := testConfig()
	proc.Processor = nopProcessor{}
	f("processor", proc, gz(), body, EncodingGzip, FallbackProcessor, false)
	routed := testConfig()
	routed.Router = newRouter(t, "")
	f("routes", routed, gz(), body, EncodingGzip, FallbackRoutes, false)
}

// nopProcessor keeps every entry as it is: its presence alone means requests may be rewritten.
type nopProcessor struct{}

func (nopProcessor) AppendEntry(dst []byte, _ fastpath.Signal, entry []byte, _ netip.Addr) ([]byte, Tally, error) {
	return protowire.AppendBytes(protowire.AppendTag(dst, 1, protowire.BytesType), entry), Tally{}, nil
}
func (nopProcessor) Commit(fastpath.Signal, Tally)  {}
func (nopProcessor) Slack(fastpath.Signal, int) int { return 0 }

// The batch limits apply to the decompressed size (what an upstream checks against its
// message limit), the queue's budget to the compressed bytes the batch holds; compressed and
// plain requests of one signal batch apart.
func TestPassThroughBatchLimits(t *testing.T) {
	body := entry(1000, 5) // 1003 bytes; its gzip member is a few dozen
	wire := gzipped(t, body)
	cfg := testConfig()
	cfg.BatchMaxBytes = 2500 // two requests decompressed, dozens compressed
	w := &wireRec{recorder: recorder{name: "a", hold: true}, enc: EncodingGzip}
	p := newTestPipeline(t, cfg, w)
	for range 5 {
		if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: body, Items: 1, Wire: wire, Encoding: EncodingGzip}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
		t.Fatal(err)
	}
	if q, want := p.QueuedBytes(), int64(5*len(wire)+len(body)); q != want {
		t.Fatalf("queued %d bytes, want %d: the compressed requests and the plain one", q, want)
	}
	p.Flush()
	got := w.batches()
	if len(got) != 4 {
		t.Fatalf("%d batches, want 4 (2+2+1 compressed, 1 plain)", len(got))
	}
	// Flush seals the open plain batch and the open pass-through one in either order.
	var wireIdx []int
	plainIdx := -1
	for i := range got {
		if w.encs[i] == EncodingNone {
			plainIdx = i
		} else {
			wireIdx = append(wireIdx, i)
		}
	}
	wantItems := []int{2, 2, 1}
	if len(wireIdx) != len(wantItems) || plainIdx < 0 || !bytes.Equal(got[plainIdx].body, body) {
		t.Fatalf("encodings %v, want three gzip batches and the plain request's", w.encs)
	}
	for k, n := range wantItems {
		i := wireIdx[k]
		if got[i].items != n || w.encs[i] != EncodingGzip || w.plains[i] != n*len(body) || !bytes.Equal(got[i].body, bytes.Repeat(wire, n)) {
			t.Fatalf("batch %d: %v, %d items, %d bytes decompressed; want gzip, %d, %d", i, w.encs[i], got[i].items, w.plains[i], n, n*len(body))
		}
	}
	if n := w.release(true); n != 4 {
		t.Fatalf("released %d batches", n)
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("%d bytes still queued once every batch was finished", q)
	}
}

// A request that passed the check just before SetDestinations swapped in destinations that do
// not send its encoding goes the plain way: a pass-through batch never reaches a destination
// that would compress it again.
func TestPassThroughSetChanged(t *testing.T) {
	body := entry(500, 2)
	wire := gzipped(t, body)
	plain := &recorder{name: "plain", ok: true}
	p := newTestPipeline(t, testConfig(), wireSink{EncodingGzip})
	if err := p.SetDestinations([]Destination{plain}); err != nil {
		t.Fatal(err)
	}
	r := Prepared{Sig: fastpath.Traces, Req: body, Items: 1, Wire: wire, Encoding: EncodingGzip}
	if _, err := p.enqueueWire(&r, false); err != errSetChanged {
		t.Fatalf("enqueueWire after the swap: %v, want errSetChanged", err)
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("%d bytes left queued by the refusal", q)
	}
	before := testutil.ToFloat64(passFallbackC[FallbackDestinations])
	if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: body, Items: 1, Wire: wire, Encoding: EncodingGzip}); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	if got := plain.batches(); len(got) != 1 || !bytes.Equal(got[0].body, body) {
		t.Fatalf("the plain destination got %d batches, want the request's plain body", len(got))
	}
	if d := testutil.ToFloat64(passFallbackC[FallbackDestinations]) - before; d != 1 {
		t.Fatalf("fallback destinations counted %v times, want 1", d)
	}
}
