package pipeline

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// recorder is a destination that keeps a copy of every batch and, unless hold is set, finishes
// it at once with result ok. It is internal/testkit's Recorder for the tests inside package
// fastpath, which cannot import testkit (testkit imports fastpath); external tests
// (package fastpath_test) use testkit.
type recorder struct {
	name   string
	hold   bool
	ok     bool
	refuse error
	mu     sync.Mutex
	got    []recorded
	held   []*Batch
}

type recorded struct {
	sig    fastpath.Signal
	items  int
	body   []byte
	tenant string   // the batch's tenant, "" without one
	enc    Encoding // the batch's encoding
}

func (r *recorder) Name() string { return r.name }

func (r *recorder) Enqueue(b *Batch) error {
	if r.refuse != nil {
		return r.refuse
	}
	r.mu.Lock()
	var tenant string
	if b.Tenant != nil {
		tenant = b.Tenant.String()
	}
	r.got = append(r.got, recorded{b.Signal, b.Items, bytes.Clone(b.Payload.Bytes()), tenant, b.Encoding})
	if r.hold {
		r.held = append(r.held, b)
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	b.Done(r.ok)
	return nil
}

func (r *recorder) release(ok bool) int {
	r.mu.Lock()
	held := r.held
	r.held = nil
	r.mu.Unlock()
	for _, b := range held {
		b.Done(ok)
	}
	return len(held)
}

func (r *recorder) batches() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.got...)
}

// sink finishes every batch at once without keeping anything: the fan-out's own cost.
type sink struct{}

func (sink) Name() string { return "sink" }
func (sink) Enqueue(b *Batch) error {
	b.Done(true)
	return nil
}

// entry is a well-formed v1 request body of one resource entry with n payload bytes.
func entry(n int, fill byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bytes.Repeat([]byte{fill}, n))
}

func testConfig() Config {
	c := DefaultConfig()
	c.BatchMaxAge = time.Hour // tests seal by size, count or Flush unless they say otherwise
	c.Eager = false
	return c
}

func newTestPipeline(t *testing.T, cfg Config, dests ...Destination) *Pipeline {
	t.Helper()
	p, err := New(cfg, dests)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestBatchingConcatenates(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 1000
	cfg.BatchMaxItems = 7
	a, b := &recorder{name: "a", ok: true}, &recorder{name: "b", ok: true}
	p := newTestPipeline(t, cfg, a, b)

	var all []byte
	for i := range 20 {
		body := entry(100+i, byte(i))
		all = append(all, body...)
		if err := p.Consume(Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
			t.Fatal(err)
		}
	}
	p.Flush()
	for _, r := range []*recorder{a, b} {
		var joined []byte
		items := 0
		for i, got := range r.batches() {
			if len(got.body) > cfg.BatchMaxBytes {
				t.Errorf("%s batch %d: %d bytes > max %d", r.name, i, len(got.body), cfg.BatchMaxBytes)
			}
			if got.items > cfg.BatchMaxItems {
				t.Errorf("%s batch %d: %d items > max %d", r.name, i, got.items, cfg.BatchMaxItems)
			}
			joined = append(joined, got.body...)
			items += got.items
		}
		if !bytes.Equal(joined, all) {
			t.Fatalf("%s: batches do not concatenate to the requests (%d vs %d bytes)", r.name, len(joined), len(all))
		}
		if items != 20 {
			t.Fatalf("%s: %d items, want 20", r.name, items)
		}
	}
	// 7 items per batch seals at 7 and 14; the bytes limit (about 9 entries) never binds first.
	if n := len(a.batches()); n != 3 {
		t.Fatalf("%d batches, want 3", n)
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("queued %d bytes after every destination finished", q)
	}
}

func TestOversizedRequestTravelsAlone(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 100
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, cfg, r)
	small, big := entry(10, 1), entry(500, 2)
	p.Consume(Request{Signal: fastpath.Logs, Body: small, Items: 1})
	p.Consume(Request{Signal: fastpath.Logs, Body: big, Items: 3})
	p.Flush()
	got := r.batches()
	if len(got) != 2 || !bytes.Equal(got[0].body, small) || !bytes.Equal(got[1].body, big) || got[1].items != 3 {
		t.Fatalf("got %d batches: %+v", len(got), got)
	}
}

func TestSignalsBatchApart(t *testing.T) {
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, testConfig(), r)
	p.Consume(Request{Signal: fastpath.Traces, Body: entry(5, 1), Items: 1})
	p.Consume(Request{Signal: fastpath.Metrics, Body: entry(6, 2), Items: 2})
	p.Consume(Request{Signal: fastpath.Traces, Body: entry(7, 3), Items: 3})
	p.Flush()
	got := map[fastpath.Signal]recorded{}
	for _, b := range r.batches() {
		got[b.sig] = b
	}
	if !bytes.Equal(got[fastpath.Traces].body, append(entry(5, 1), entry(7, 3)...)) || got[fastpath.Traces].items != 4 {
		t.Fatalf("traces batch %+v", got[fastpath.Traces])
	}
	if !bytes.Equal(got[fastpath.Metrics].body, entry(6, 2)) || got[fastpath.Metrics].items != 2 {
		t.Fatalf("metrics batch %+v", got[fastpath.Metrics])
	}
}

func TestAdmitOTEPRetags(t *testing.T) {
	r := &recorder{name: "r", ok: true}
	p := newTestPipeline(t, testConfig(), r)
	v1 := append(entry(20, 7), entry(3, 8)...)
	otep, err := fastpath.AppendOTEP(nil, 42, v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Admit(Request{Signal: fastpath.Metrics, Body: otep, Items: 2, Layout: fastpath.LayoutOTEP}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Admit(Request{Signal: fastpath.Metrics, Body: []byte{0x08}, Items: 0, Layout: fastpath.LayoutOTEP}); err == nil {
		t.Fatal("truncated OTEP request admitted")
	}
	p.Flush()
	got := r.batches()
	if len(got) != 1 || !bytes.Equal(got[0].body, v1) {
		t.Fatalf("got %+v, want the v1 body", got)
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("queued %d after delivery: the budget was not settled in v1 size", q)
	}
}

func TestQueueBound(t *testing.T) {
	cfg := testConfig()
	cfg.QueueMaxBytes = 10_000
	cfg.BatchMaxBytes = 1000
	r := &recorder{name: "slow", hold: true}
	p := newTestPipeline(t, cfg, r)
	body := entry(250, 1)
	admitted := 0
	var err error
	for range 1000 {
		if err = p.Consume(Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
			break
		}
		admitted++
		if q := p.QueuedBytes(); q > cfg.QueueMaxBytes {
			t.Fatalf("queued %d > max %d", q, cfg.QueueMaxBytes)
		}
	}
	if !errors.Is(err, ErrFull) {
		t.Fatalf("admission never refused: %v", err)
	}
	if want := int(cfg.QueueMaxBytes) / len(body); admitted != want {
		t.Fatalf("admitted %d, want %d", admitted, want)
	}
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: entry(20_000, 1), Items: 1}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized request: %v", err)
	}
	p.Flush()
	r.release(true)
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("queued %d after the destination drained", q)
	}
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
		t.Fatalf("after draining: %v", err)
	}
	items := 0
	for _, b := range r.batches() {
		items += b.items
	}
	if items != admitted {
		t.Fatalf("delivered %d items, admitted %d", items, admitted)
	}
}

func TestUpstreamAck(t *testing.T) {
	cfg := testConfig()
	cfg.Ack = AckUpstream
	a, b := &recorder{name: "a", hold: true}, &recorder{name: "b", hold: true}
	p := newTestPipeline(t, cfg, a, b)

	batch, err := p.Admit(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
	if err != nil || batch == nil {
		t.Fatalf("Admit: %v, %v", batch, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	if _, err := batch.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait before sealing: %v", err)
	}
	cancel()
	p.Flush()
	a.release(true)
	done := make(chan bool)
	go func() {
		ok, err := batch.Wait(context.Background())
		if err != nil {
			t.Error(err)
		}
		batch.Unref()
		done <- ok
	}()
	b.release(false) // one destination gave up: the request was not delivered end to end
	if ok := <-done; ok {
		t.Fatal("Wait reported delivery though destination b failed")
	}

	batch, _ = p.Admit(Request{Signal: fastpath.Traces, Body: entry(10, 2), Items: 1})
	p.Flush()
	a.release(true)
	b.release(true)
	if ok, err := batch.Wait(context.Background()); !ok || err != nil {
		t.Fatalf("Wait = %v, %v; want delivered", ok, err)
	}
	batch.Unref()
}

func TestDestinationRefusalDoesNotBlockOthers(t *testing.T) {
	full := &recorder{name: "full", refuse: ErrFull}
	closed := &recorder{name: "closed", refuse: ErrClosed}
	ok := &recorder{name: "ok", ok: true}
	p := newTestPipeline(t, testConfig(), full, closed, ok)
	p.Consume(Request{Signal: fastpath.Logs, Body: entry(10, 1), Items: 1})
	p.Flush()
	if n := len(ok.batches()); n != 1 {
		t.Fatalf("healthy destination got %d batches", n)
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Fatalf("queued %d: refused hand-overs must settle the budget", q)
	}
}

// An open batch is sealed once it is BatchMaxAge old (by the flusher's next tick), not before.
// The bubble's clock makes both bounds exact on any machine.
func TestAgeSealsBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.BatchMaxAge = 8 * time.Millisecond
		tick := cfg.BatchMaxAge / 4 // the flusher's period
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
		time.Sleep(cfg.BatchMaxAge - time.Nanosecond)
		synctest.Wait()
		if n := len(r.batches()); n != 0 {
			t.Fatalf("%d batches before the batch was BatchMaxAge old, want 0", n)
		}
		time.Sleep(tick)
		synctest.Wait()
		if got := r.batches(); len(got) != 1 || got[0].items != 1 {
			t.Fatalf("batches %+v one tick past the age, want the open batch sealed", got)
		}
	})
}

func TestClose(t *testing.T) {
	r := &recorder{name: "r", ok: true}
	p, err := New(testConfig(), []Destination{r})
	if err != nil {
		t.Fatal(err)
	}
	p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
	p.Close()
	if len(r.batches()) != 1 {
		t.Fatal("Close did not seal the open batch")
	}
	if err := p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	p.Close() // idempotent
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Config){
		func(c *Config) { c.QueueMaxBytes = 0 },
		func(c *Config) { c.BatchMaxBytes = 0 },
		func(c *Config) { c.BatchMaxBytes = int(c.QueueMaxBytes) + 1 },
		func(c *Config) { c.BatchMaxItems = 0 },
		func(c *Config) { c.BatchMaxAge = 0 },
		func(c *Config) { c.Ack = 9 },
	} {
		c := DefaultConfig()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("invalid config accepted: %+v", c)
		}
	}
	if _, err := New(DefaultConfig(), nil); err == nil {
		t.Error("pipeline without destinations accepted")
	}
	for _, s := range []string{"accept", "upstream"} {
		if m, err := ParseAckMode(s); err != nil || m.String() != s {
			t.Errorf("ParseAckMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseAckMode("x"); err == nil {
		t.Error("bad ack mode accepted")
	}
	for _, s := range []string{"top", "resource", "full"} {
		if d, err := ParseDepth(s); err != nil || d.String() != s {
			t.Errorf("ParseDepth(%q) = %v, %v", s, d, err)
		}
	}
	if _, err := ParseDepth("deep"); err == nil {
		t.Error("bad depth accepted")
	}
}

// capRecorder records the capacity of each batch's buffer.
type capRecorder struct {
	mu   sync.Mutex
	caps []int
	lens []int
}

func (c *capRecorder) Name() string { return "caps" }

func (c *capRecorder) Enqueue(b *Batch) error {
	c.mu.Lock()
	c.caps = append(c.caps, cap(b.Payload.Bytes()))
	c.lens = append(c.lens, b.Len())
	c.mu.Unlock()
	b.Done(true)
	return nil
}

// A batch starts with room for about the last sealed batch of its signal, not BatchMaxBytes,
// and grows (through the pool) when requests need more.
func TestBatchBuffersStartSmall(t *testing.T) {
	cfg := testConfig()
	cfg.BatchMaxBytes = 1 << 20
	c := &capRecorder{}
	p := newTestPipeline(t, cfg, c)
	p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
	p.Flush()
	for range 30 { // grows past the first buffer
		p.Consume(Request{Signal: fastpath.Traces, Body: entry(5000, 2), Items: 1})
	}
	p.Flush()
	p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 3), Items: 1})
	p.Flush()
	if c.caps[0] >= 64<<10 {
		t.Errorf("first batch of 13 bytes got a %d-byte buffer", c.caps[0])
	}
	if c.lens[1] != 30*5003 || c.caps[1] < c.lens[1] {
		t.Errorf("grown batch: len %d cap %d", c.lens[1], c.caps[1])
	}
	if c.caps[2] < c.lens[1] {
		t.Errorf("the batch after a %d-byte one started with only %d bytes", c.lens[1], c.caps[2])
	}
}

// Eager sealing: with nothing in the destinations' hands a request is sealed at once; while a
// batch is out, requests gather in the open batch, which leaves as soon as the destination
// finishes the first; after that the next request goes at once again.
func TestEagerSealing(t *testing.T) {
	cfg := testConfig()
	cfg.Eager = true
	cfg.BatchMinGap = 0 // eager sealing alone; TestMinGapSealing adds the gap
	r := &recorder{name: "r", hold: true}
	p := newTestPipeline(t, cfg, r)
	p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
	if n := len(r.batches()); n != 1 {
		t.Fatalf("idle path: %d batches sealed, want the first request at once", n)
	}
	for i := range 5 {
		p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, byte(2+i)), Items: 1})
	}
	if n := len(r.batches()); n != 1 {
		t.Fatalf("busy path: %d batches, want the five requests to wait", n)
	}
	r.release(true) // the destination finished the first batch
	got := r.batches()
	if len(got) != 2 || got[1].items != 5 {
		t.Fatalf("after the destination finished: %d batches (%+v), want the five waiting requests sealed together", len(got), got)
	}
	r.release(true)
	p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 9), Items: 1})
	if got := r.batches(); len(got) != 3 || got[2].items != 1 {
		t.Fatalf("idle again: batches %+v, want the next request sealed at once", got)
	}
}

// With BatchMinGap, requests that follow a seal within the gap wait for it and leave together;
// a request after a quiet gap leaves at once. The destination is never busy here: Eager alone
// would send every request on its own. Held requests followed by silence leave with the gap
// timer, set as a fallback a quarter of a gap past the gap's end: never before 1.25 gaps, at
// 1.25 gaps.
func TestMinGapSealing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Eager = true
		cfg.BatchMinGap = 200 * time.Millisecond
		cfg.BatchMaxAge = time.Minute
		r := &recorder{name: "r"}
		p := newTestPipeline(t, cfg, r)
		p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
		if n := len(r.batches()); n != 1 {
			t.Fatalf("%d batches after the first request, want it sealed at once", n)
		}
		for i := range 4 {
			p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, byte(2+i)), Items: 1})
		}
		if n := len(r.batches()); n != 1 {
			t.Fatalf("%d batches, want the four requests within the gap held back", n)
		}
		time.Sleep(cfg.BatchMinGap + cfg.BatchMinGap/4 - time.Nanosecond)
		synctest.Wait()
		if n := len(r.batches()); n != 1 {
			t.Fatalf("%d batches just before 1.25 gaps after the first seal, want the held requests still waiting for the fallback", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := r.batches(); len(got) != 2 || got[1].items != 4 {
			t.Fatalf("batches %+v 1.25 gaps after the first seal, want the four held requests together", got)
		}
		time.Sleep(cfg.BatchMinGap + time.Nanosecond) // quiet for longer than the gap
		p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 9), Items: 1})
		if got := r.batches(); len(got) != 3 || got[2].items != 1 {
			t.Fatalf("batches %+v, want the request after a quiet gap sealed at once", got)
		}
	})
}

// Requests refused at a full queue must not lift the queued bytes above the bound even for a
// moment: otlpgate_queue_bytes, /readyz and the status page read the same counter, and a gauge
// over its configured maximum reads as a broken bound.
func TestQueueNeverReadsAboveBound(t *testing.T) {
	body := entry(250, 1)
	wire := compressTo(t, EncodingZstd, body)
	for _, c := range []struct {
		name  string
		setup func(cfg *Config) Destination
		admit func(p *Pipeline) error
	}{
		{"plain", func(*Config) Destination { return &recorder{name: "slow", hold: true} },
			func(p *Pipeline) error { return p.Consume(Request{Signal: fastpath.Traces, Body: body, Items: 1}) }},
		{"routes", func(cfg *Config) Destination {
			cfg.Router = newRouter(t, "")
			return &recorder{name: "slow", hold: true}
		}, func(p *Pipeline) error { return p.Consume(Request{Signal: fastpath.Traces, Body: body, Items: 1}) }},
		{"pass-through", func(*Config) Destination {
			return &wireRec{recorder: recorder{name: "slow", hold: true}, enc: EncodingZstd}
		}, func(p *Pipeline) error {
			_, err := p.Admit(Request{Signal: fastpath.Traces, Body: body, Items: 1, Wire: wire, Encoding: EncodingZstd})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.QueueMaxBytes = 10_000
			cfg.BatchMaxBytes = 1000
			d := c.setup(&cfg)
			p := newTestPipeline(t, cfg, d)
			for p.Consume(Request{Signal: fastpath.Traces, Body: body, Items: 1}) == nil {
			}
			small := entry(3, 2)
			for p.Consume(Request{Signal: fastpath.Traces, Body: small, Items: 1}) == nil {
			}
			if q := p.QueuedBytes(); q > cfg.QueueMaxBytes || q+int64(len(small)) <= cfg.QueueMaxBytes {
				t.Fatalf("queued %d: want the queue full within %d bytes of %d", q, len(small), cfg.QueueMaxBytes)
			}
			var done atomic.Bool
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 50_000 {
						if err := c.admit(p); !errors.Is(err, ErrFull) {
							t.Errorf("a full queue admitted a request: %v", err)
							return
						}
					}
				}()
			}
			go func() { wg.Wait(); done.Store(true) }()
			peak := int64(0)
			for !done.Load() {
				peak = max(peak, p.QueuedBytes())
			}
			if peak > cfg.QueueMaxBytes {
				t.Fatalf("queued bytes read %d, above the bound %d, while full requests were refused", peak, cfg.QueueMaxBytes)
			}
			p.Flush()
			switch d := d.(type) {
			case *recorder:
				d.release(true)
			case *wireRec:
				d.release(true)
			}
		})
	}
}

// slowDest is a recorder whose Enqueue, once entered, takes delay before it records: a
// goroutine preempted while handing a batch out.
type slowDest struct {
	recorder
	entered chan struct{}
	once    sync.Once
	delay   time.Duration
}

func (d *slowDest) Enqueue(b *Batch) error {
	d.once.Do(func() { close(d.entered) })
	time.Sleep(d.delay)
	return d.recorder.Enqueue(b)
}

// Flush returns once a batch that another goroutine took out of the open set just before (here
// an eager seal on the admitting goroutine) is with the destinations: a caller that flushes and
// then reads what the destinations got finds it, where it used to find nothing, since Flush
// found no batch open.
func TestFlushWaitsForSealsInProgress(t *testing.T) {
	cfg := testConfig()
	cfg.Eager, cfg.BatchMinGap = true, 0
	d := &slowDest{recorder: recorder{name: "slow", ok: true}, entered: make(chan struct{}), delay: 30 * time.Millisecond}
	p := newTestPipeline(t, cfg, d)
	req := entry(100, 'a')
	admitted := make(chan error, 1)
	go func() {
		_, err := p.Admit(Request{Signal: fastpath.Traces, Body: req, Items: 1})
		admitted <- err
	}()
	<-d.entered // the admitting goroutine sealed the batch and is handing it out
	p.Flush()
	if got := d.batches(); len(got) != 1 || !bytes.Equal(got[0].body, req) {
		t.Fatalf("after Flush the destination holds %d batches, want the one being handed out", len(got))
	}
	if err := <-admitted; err != nil {
		t.Fatal(err)
	}
}
