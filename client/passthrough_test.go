package client

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// compressAs compresses body as one gzip member or zstd frame, as an exporter does.
func compressAs(t *testing.T, enc pipeline.Encoding, body []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	switch enc {
	case pipeline.EncodingGzip:
		w := gzip.NewWriter(&b)
		w.Write(body)
		w.Close()
	case pipeline.EncodingZstd:
		w, err := zstd.NewWriter(&b, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(body)
		w.Close()
	}
	return b.Bytes()
}

// passThroughFeed admits three compressed requests into one pass-through batch for d and
// returns their decompressed concatenation and compressed size.
func passThroughFeed(t *testing.T, d *Dest, enc pipeline.Encoding) (plain []byte, wire int) {
	t.Helper()
	if got := d.PassThrough(); got != enc {
		t.Fatalf("destination passes %v through, want %v", got, enc)
	}
	cfg := pipeline.DefaultConfig()
	cfg.Eager, cfg.BatchMaxAge = false, time.Hour
	p, err := pipeline.New(cfg, []pipeline.Destination{d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	for i := range 3 {
		body := traceBody("pt"+string(rune('a'+i)), 2, 300)
		z := compressAs(t, enc, body)
		if _, err := p.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 2, Wire: z, Encoding: enc}); err != nil {
			t.Fatal(err)
		}
		plain, wire = append(plain, body...), wire+len(z)
	}
	p.Flush()
	return plain, wire
}

// A pass-through batch goes to an OTLP/HTTP upstream as it is, with its Content-Encoding, and
// to a v1 gRPC upstream as the compressed message it already is: each upstream decompresses it
// once (klauspost's readers; codec's, as registered) into the three requests, byte for byte.
// sent_bytes counts them decompressed, as for any batch.
func TestPassThroughSentAsReceived(t *testing.T) {
	for _, enc := range []pipeline.Encoding{pipeline.EncodingGzip, pipeline.EncodingZstd} {
		t.Run("http/"+enc.String(), func(t *testing.T) {
			u := newHTTPUpstream(t, nil)
			d := startDest(t, httpConfig(t, u, "compression="+enc.String()+",concurrency=1"))
			plain, _ := passThroughFeed(t, d, enc)
			h := u.waitHits(1)[0]
			if h.encoding != enc.String() || !bytes.Equal(h.body, plain) {
				t.Fatalf("Content-Encoding %q, %d bytes decompressed; want %s, the %d bytes of the requests", h.encoding, len(h.body), enc, len(plain))
			}
			testWaitAcked(t, d, 1)
			if got := value(d.m.sentBytes); got != len(plain) {
				t.Fatalf("sent bytes %d, want %d", got, len(plain))
			}
		})
		t.Run("v1/"+enc.String(), func(t *testing.T) {
			u := newUpstream(t)
			cfg := testConfig(t, u.addr)
			cfg.Protocol, cfg.Mode, cfg.Compression = ProtocolV1, ModeUnary, enc.String()
			d := startDest(t, cfg)
			plain, _ := passThroughFeed(t, d, enc)
			u.waitUntil("the batch", func() bool { return len(u.got) >= 1 })
			g := u.received()
			if len(g) != 1 || !bytes.Equal(g[0].body, plain) {
				t.Fatalf("%d calls; want one holding the %d bytes of the requests", len(g), len(plain))
			}
			u.mu.Lock()
			comp := append([]string(nil), u.compressed...)
			u.mu.Unlock()
			if len(comp) != 1 || comp[0] != enc.String() {
				t.Fatalf("grpc-encoding %v, want %s", comp, enc)
			}
		})
	}
}

// max-send-msg-size applies to the decompressed size of a pass-through batch: one that fits
// compressed but not decompressed is dropped as too_large, as the Collector would refuse it.
func TestPassThroughTooLargeDecompressed(t *testing.T) {
	u := newHTTPUpstream(t, nil)
	plainLen := 0
	for i := range 3 {
		plainLen += len(traceBody("pt"+string(rune('a'+i)), 2, 300))
	}
	cfg := httpConfig(t, u, "compression=gzip,concurrency=1")
	cfg.MaxSendMsgSize = plainLen - 1
	d := startDest(t, cfg)
	plain, wire := passThroughFeed(t, d, pipeline.EncodingGzip)
	if len(plain) != plainLen || wire >= cfg.MaxSendMsgSize {
		t.Fatalf("the test needs a batch that fits compressed (%d) and not decompressed (%d) in %d", wire, len(plain), cfg.MaxSendMsgSize)
	}
	deadline := time.Now().Add(waitFor)
	for value(d.m.dropped[DropTooLarge]) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the batch was not dropped as too_large")
		}
		time.Sleep(time.Millisecond)
	}
	if n := len(u.received()); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
}

// testWaitAcked waits until d counted n acknowledged requests.
func testWaitAcked(t *testing.T, d *Dest, n int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for value(d.m.ackedRequests) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests acknowledged, want %d", value(d.m.ackedRequests), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A pass-through batch in an encoding the destination does not send is dropped as invalid,
// never sent: compressed again, or sent as if plain, it would reach the upstream unreadable.
// The pipeline never hands over such a batch; this holds the destination to it.
func TestPassThroughWrongEncodingDropped(t *testing.T) {
	u := newHTTPUpstream(t, nil)
	d := startDest(t, httpConfig(t, u, "compression=gzip,concurrency=1"))
	body := traceBody("wrong", 1, 10)
	pl := pool.NewPayload(64)
	*pl.Buf() = append(*pl.Buf(), compressAs(t, pipeline.EncodingZstd, body)...)
	owner := &doneOwner{}
	b := pipeline.NewBatch(fastpath.Traces, 1, pl, owner)
	b.Encoding = pipeline.EncodingZstd
	if err := d.Enqueue(b); err != nil {
		t.Fatal(err)
	}
	// The drop is counted before the batch is finished: wait for both.
	deadline := time.Now().Add(waitFor)
	for _, n := owner.get(); value(d.m.dropped[DropInvalid]) != 1 || n == 0; _, n = owner.get() {
		if time.Now().After(deadline) {
			t.Fatal("the batch was not dropped as invalid")
		}
		time.Sleep(time.Millisecond)
	}
	if n := len(u.received()); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
	if d, n := owner.get(); n != 1 || d {
		t.Fatalf("the batch finished %d times, delivered %v; want once, not delivered", n, d)
	}
}

// doneOwner notes how a batch built by NewBatch finished.
type doneOwner struct {
	mu        sync.Mutex
	n         int
	delivered bool
}

func (o *doneOwner) BatchDone(delivered bool) {
	o.mu.Lock()
	o.n, o.delivered = o.n+1, delivered
	o.mu.Unlock()
}

func (o *doneOwner) get() (bool, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.delivered, o.n
}
