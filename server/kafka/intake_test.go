package kafka

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// pushResp sends a push and returns the whole response.
func (c *client) pushResp(id [16]byte, subID int32, codec int8, payload []byte) *kmsg.PushTelemetryResponse {
	c.t.Helper()
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID, req.SubscriptionID, req.CompressionType, req.Metrics = id, subID, codec, payload
	return c.request(req).(*kmsg.PushTelemetryResponse)
}

// largeZstd is a zstd MetricsData of about n bytes compressed: metric names with random
// letters do not compress much.
func largeZstd(t testing.TB, seed uint64, n int) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	names := make([]string, n/40)
	for i := range names {
		b := make([]byte, 40)
		for j := range b {
			b[j] = 'a' + byte(r.IntN(26))
		}
		names[i] = string(b)
	}
	return zstdPayload(t, testMetrics(names...))
}

// A push that finds no decode slot within -intake.wait is answered THROTTLING_QUOTA_EXCEEDED
// with the wait as throttle time, counted, and nothing is forwarded.
func TestPushIntakeBusyDecodes(t *testing.T) {
	lim := fastpath.NewLimiter(fastpath.LimiterConfig{MaxBytes: 8 << 20, MaxDecodes: 1, Wait: 20 * time.Millisecond})
	cfg := testConfig()
	cfg.Limiter = lim
	rec := &recorder{}
	s, clk := startServer(t, cfg, rec)
	c := dial(t, s, "busy")
	sub := c.get([16]byte{})
	payload := zstdPayload(t, testMetrics("a.gauge", "a.sum"))

	if !lim.AcquireDecode(fastpath.IntakeKafka, nil) {
		t.Fatal("cannot take the only decode slot")
	}
	before := counterValue(t, errIntakeBusy)
	resp := c.pushResp(sub.ClientInstanceID, sub.SubscriptionID, 4, payload)
	if resp.ErrorCode != errThrottlingQuotaExceeded || resp.ThrottleMillis != 20 {
		t.Fatalf("busy push: code %d throttle %dms, want %d and 20ms", resp.ErrorCode, resp.ThrottleMillis, errThrottlingQuotaExceeded)
	}
	if got := counterValue(t, errIntakeBusy) - before; got != 1 || rec.count() != 0 {
		t.Fatalf("intake_busy grew by %v, %d forwarded; want 1 and 0", got, rec.count())
	}
	lim.ReleaseDecode()
	clk.advance(2 * time.Second)
	resp = c.pushResp(sub.ClientInstanceID, sub.SubscriptionID, 4, payload)
	if resp.ErrorCode != errNone || resp.ThrottleMillis != 0 || rec.count() != 1 {
		t.Fatalf("push with room: code %d throttle %d, %d forwarded", resp.ErrorCode, resp.ThrottleMillis, rec.count())
	}
	if lim.Bytes() != 0 || lim.Decodes() != 0 {
		t.Fatalf("limiter holds %d bytes, %d decodes after the pushes", lim.Bytes(), lim.Decodes())
	}
}

// A request body that finds no room in -intake.max-bytes is read through a small buffer and
// dropped, answered THROTTLING_QUOTA_EXCEEDED, and the connection stays in step.
func TestPushIntakeBusyBytes(t *testing.T) {
	lim := fastpath.NewLimiter(fastpath.LimiterConfig{MaxBytes: 1 << 20, MaxDecodes: 4, Wait: 20 * time.Millisecond})
	cfg := testConfig()
	cfg.Limiter = lim
	rec := &recorder{}
	s, clk := startServer(t, cfg, rec)
	c := dial(t, s, "busy")
	sub := c.get([16]byte{})
	payload := largeZstd(t, 1, 100<<10)
	if len(payload) <= smallBufSize || len(payload) > cfg.TelemetryMaxBytes {
		t.Fatalf("payload of %d bytes, want a large one under the telemetry limit", len(payload))
	}
	if !lim.AcquireBytes(fastpath.IntakeKafka, 1<<20, nil) {
		t.Fatal("cannot take the whole budget")
	}
	before := counterValue(t, errIntakeBusy)
	resp := c.pushResp(sub.ClientInstanceID, sub.SubscriptionID, 4, payload)
	if resp.ErrorCode != errThrottlingQuotaExceeded || resp.ThrottleMillis != 20 {
		t.Fatalf("busy push: code %d throttle %dms, want %d and 20ms", resp.ErrorCode, resp.ThrottleMillis, errThrottlingQuotaExceeded)
	}
	if got := counterValue(t, errIntakeBusy) - before; got != 1 || rec.count() != 0 {
		t.Fatalf("intake_busy grew by %v, %d forwarded; want 1 and 0", got, rec.count())
	}
	lim.ReleaseBytes(1 << 20)
	clk.advance(2 * time.Second)
	if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 4, payload, false); code != errNone || rec.count() != 1 {
		t.Fatalf("push with room: code %d, %d forwarded", code, rec.count())
	}
	if lim.Bytes() != 0 || lim.HighWaterBytes() != 1<<20 {
		t.Fatalf("limiter holds %d bytes (high water %d) after the pushes", lim.Bytes(), lim.HighWaterBytes())
	}
}

// Many clients pushing large compressed payloads at once over TCP: the buffers the connections
// hold before admission stay within the limiter's bound. Without the limiter every connection
// holds its request and a decompression buffer at once (hundreds of MiB here).
func TestManyConcurrentPushesBoundedMemory(t *testing.T) {
	const clients = 256
	const maxBytes = 8 << 20
	const decodes = 4
	lim := fastpath.NewLimiter(fastpath.LimiterConfig{MaxBytes: maxBytes, MaxDecodes: decodes, Wait: time.Minute})
	cfg := testConfig()
	cfg.Limiter = lim
	cfg.MaxConnections = clients
	cfg.ReadTimeout = time.Minute
	rec := &recorder{}
	s, clk := startServer(t, cfg, rec)
	payloads := make([][]byte, 8)
	for i := range payloads {
		payloads[i] = largeZstd(t, uint64(i), 200<<10)
	}
	conns := make([]*client, clients)
	subs := make([]*kmsg.GetTelemetrySubscriptionsResponse, clients)
	for i := range conns {
		conns[i] = dial(t, s, fmt.Sprintf("c%d", i))
		conns[i].wait = 5 * time.Minute // 256 pushes through 4 decodes, under the race detector too
		subs[i] = conns[i].get([16]byte{})
	}
	clk.advance(2 * time.Second)
	bufferedHigh.Store(buffered.Load())
	start := make(chan struct{})
	var wg sync.WaitGroup
	codes := make([]int16, clients)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes[i] = conns[i].push(subs[i].ClientInstanceID, subs[i].SubscriptionID, 4, payloads[i%len(payloads)], false)
		}()
	}
	close(start)
	wg.Wait()
	for i, code := range codes {
		if code != errNone {
			t.Fatalf("client %d: code %d, want 0 (the limiter waits up to a minute)", i, code)
		}
	}
	if rec.count() != clients {
		t.Fatalf("%d pushes forwarded, want %d", rec.count(), clients)
	}
	// Request bodies take their tier size from the limiter; a pooled buffer of a tier may have
	// grown to just under twice it. Each decode holds one decompression buffer of the
	// telemetry limit's tier and one labelled body of at most twice the limit, under the same
	// factor. Every connection keeps a small response buffer.
	bound := int64(2*maxBytes + 2*decodes*(pool.Cap(cfg.TelemetryMaxBytes)+pool.Cap(2*cfg.TelemetryMaxBytes)) + clients*smallBufSize)
	high := bufferedHigh.Load()
	t.Logf("%d clients, %d-byte pushes: buffered high water %d bytes (bound %d), limiter high water %d of %d",
		clients, len(payloads[0]), high, bound, lim.HighWaterBytes(), maxBytes)
	if high > bound {
		t.Fatalf("connections held %d bytes at once, bound %d", high, bound)
	}
	// What stays is the response buffers of the idle connections, small ones.
	if lim.Bytes() != 0 || lim.Decodes() != 0 || buffered.Load() > clients*1024 {
		t.Fatalf("after the pushes: limiter %d bytes %d decodes, buffered %d", lim.Bytes(), lim.Decodes(), buffered.Load())
	}
}
