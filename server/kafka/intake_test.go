package kafka

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
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
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 8 << 20, MaxDecodes: 1, Wait: 20 * time.Millisecond})
	cfg := testConfig()
	cfg.Limiter = lim
	rec := &testkit.Recorder{}
	s, clk := startServer(t, cfg, rec)
	c := dial(t, s, "busy")
	sub := c.get([16]byte{})
	payload := zstdPayload(t, testMetrics("a.gauge", "a.sum"))

	if !lim.AcquireDecode(admission.IntakeKafka, nil) {
		t.Fatal("cannot take the only decode slot")
	}
	before := counterValue(t, errIntakeBusy)
	resp := c.pushResp(sub.ClientInstanceID, sub.SubscriptionID, 4, payload)
	if resp.ErrorCode != errThrottlingQuotaExceeded || resp.ThrottleMillis != 20 {
		t.Fatalf("busy push: code %d throttle %dms, want %d and 20ms", resp.ErrorCode, resp.ThrottleMillis, errThrottlingQuotaExceeded)
	}
	if got := counterValue(t, errIntakeBusy) - before; got != 1 || rec.Count() != 0 {
		t.Fatalf("intake_busy grew by %v, %d forwarded; want 1 and 0", got, rec.Count())
	}
	lim.ReleaseDecode()
	clk.Advance(2 * time.Second)
	resp = c.pushResp(sub.ClientInstanceID, sub.SubscriptionID, 4, payload)
	if resp.ErrorCode != errNone || resp.ThrottleMillis != 0 || rec.Count() != 1 {
		t.Fatalf("push with room: code %d throttle %d, %d forwarded", resp.ErrorCode, resp.ThrottleMillis, rec.Count())
	}
	if lim.Bytes() != 0 || lim.Decodes() != 0 {
		t.Fatalf("limiter holds %d bytes, %d decodes after the pushes", lim.Bytes(), lim.Decodes())
	}
}

// A request body whose buffer finds no room to grow in the unauthenticated intakes' budget is
// read through a small buffer and dropped, answered THROTTLING_QUOTA_EXCEEDED, and the
// connection stays in step.
func TestPushIntakeBusyBytes(t *testing.T) {
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 4 << 20, MaxDecodes: 4, Wait: 20 * time.Millisecond})
	cfg := testConfig()
	cfg.MaxRequestBytes = 2 << 20
	cfg.Limiter = lim
	rec := &testkit.Recorder{}
	s, clk := startServer(t, cfg, rec)
	c := dial(t, s, "busy")
	sub := c.get([16]byte{})
	payload := largeZstd(t, 1, 100<<10)
	if len(payload) <= 2*smallBufSize || len(payload) > cfg.TelemetryMaxBytes {
		t.Fatalf("payload of %d bytes, want a large one under the telemetry limit", len(payload))
	}
	if !lim.AcquireBytes(admission.IntakeKafka, 4<<20, nil) {
		t.Fatal("cannot take the whole budget")
	}
	before := counterValue(t, errIntakeBusy)
	resp := c.pushResp(sub.ClientInstanceID, sub.SubscriptionID, 4, payload)
	if resp.ErrorCode != errThrottlingQuotaExceeded || resp.ThrottleMillis != 20 {
		t.Fatalf("busy push: code %d throttle %dms, want %d and 20ms", resp.ErrorCode, resp.ThrottleMillis, errThrottlingQuotaExceeded)
	}
	if got := counterValue(t, errIntakeBusy) - before; got != 1 || rec.Count() != 0 {
		t.Fatalf("intake_busy grew by %v, %d forwarded; want 1 and 0", got, rec.Count())
	}
	lim.ReleaseBytes(admission.IntakeKafka, 4<<20)
	clk.Advance(2 * time.Second)
	if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 4, payload, false); code != errNone || rec.Count() != 1 {
		t.Fatalf("push with room: code %d, %d forwarded", code, rec.Count())
	}
	if lim.Bytes() != 0 || lim.HighWaterBytes() != 4<<20 {
		t.Fatalf("limiter holds %d bytes (high water %d) after the pushes", lim.Bytes(), lim.HighWaterBytes())
	}
}

// A push is decompressed into a buffer whose bytes come from the intake limiter before
// anything is decompressed into it: without room the push is answered THROTTLING_QUOTA_EXCEEDED
// like any push the limiter refuses, and nothing is forwarded; with room the limiter's
// high-water mark shows the buffer.
func TestPushDecompressionHoldsIntakeLimiter(t *testing.T) {
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 8 << 20, MaxDecodes: 4, Wait: 20 * time.Millisecond})
	cfg := testConfig()
	cfg.Limiter = lim
	rec := &testkit.Recorder{}
	s, clk := startServer(t, cfg, rec)
	c := dial(t, s, "bomb")
	sub := c.get([16]byte{})
	payload := zstdPayload(t, testMetrics("a.gauge", "a.sum"))
	if len(payload) > smallBufSize {
		t.Fatalf("payload of %d bytes: the request itself would take bytes", len(payload))
	}
	// Room for everything but the decompression buffer.
	held := int64(8<<20 - pool.Cap(cfg.TelemetryMaxBytes) + 1)
	if !lim.AcquireBytes(admission.IntakeKafka, held, nil) {
		t.Fatal("cannot fill the budget")
	}
	before := counterValue(t, errIntakeBusy)
	resp := c.pushResp(sub.ClientInstanceID, sub.SubscriptionID, 4, payload)
	if resp.ErrorCode != errThrottlingQuotaExceeded || resp.ThrottleMillis != 20 {
		t.Fatalf("push without room to decompress: code %d throttle %dms, want %d and 20ms", resp.ErrorCode, resp.ThrottleMillis, errThrottlingQuotaExceeded)
	}
	if got := counterValue(t, errIntakeBusy) - before; got != 1 || rec.Count() != 0 {
		t.Fatalf("intake_busy grew by %v, %d forwarded; want 1 and 0", got, rec.Count())
	}
	lim.ReleaseBytes(admission.IntakeKafka, held)
	clk.Advance(2 * time.Second)
	if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 4, payload, false); code != errNone || rec.Count() != 1 {
		t.Fatalf("push with room: code %d, %d forwarded", code, rec.Count())
	}
	if lim.Bytes() != 0 || lim.HighWaterBytes() != held {
		t.Fatalf("limiter holds %d (high water %d), want 0 (and %d)", lim.Bytes(), lim.HighWaterBytes(), held)
	}
	if lim.Decodes() != 0 {
		t.Fatalf("%d decode slots held after the pushes", lim.Decodes())
	}
}

// Connections that announce the largest request and stall hold intake bytes in proportion to
// what they sent, not to what they announced: 64 of them, each announcing
// -kafka.max-request-bytes and sending 40KiB, used to take the whole budget until
// -kafka.read-timeout and every push beside them was throttled. A well-behaved client beside
// them keeps being served, and the gRPC and OTLP/HTTP budget is never touched.
func TestStalledRequestsDoNotLockOutOthers(t *testing.T) {
	const budget = 8 << 20
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 16 << 20, UnauthenticatedMaxBytes: budget, MaxDecodes: 4, Wait: 50 * time.Millisecond})
	cfg := testConfig()
	cfg.Limiter = lim
	cfg.MaxConnections = 128
	rec := &testkit.Recorder{}
	s, clk := startServer(t, cfg, rec)
	const stalled, sent = 64, 40 << 10
	for range stalled {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		var size [4]byte
		binary.BigEndian.PutUint32(size[:], uint32(cfg.MaxRequestBytes))
		nc.Write(append(size[:], make([]byte, sent)...))
	}
	// Each grows past its first buffer to hold what it sent (64KiB), or, as before, takes what
	// it announced, which fills the budget with two of them.
	for i := 0; lim.BytesFor(admission.IntakeKafka) < min(stalled*64<<10, budget); i++ {
		if i > 2000 {
			t.Fatalf("the stalled requests hold %d bytes", lim.BytesFor(admission.IntakeKafka))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := lim.BytesFor(admission.IntakeKafka); got > stalled*64<<10 {
		t.Fatalf("%d stalled requests that sent %d bytes each hold %d bytes", stalled, sent, got)
	}
	if !lim.TryAcquireBytes(admission.IntakeGRPC, 16<<20) {
		t.Fatal("the gRPC and OTLP/HTTP budget is not whole while Kafka clients stall")
	}
	lim.ReleaseBytes(admission.IntakeGRPC, 16<<20)

	c := dial(t, s, "good")
	sub := c.get([16]byte{})
	payload := largeZstd(t, 2, 100<<10)
	for i := range 5 {
		clk.Advance(2 * time.Second)
		if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 4, payload, false); code != errNone {
			t.Fatalf("well-behaved push %d beside the stalled requests: code %d", i, code)
		}
	}
	if rec.Count() != 5 {
		t.Fatalf("%d pushes forwarded, want 5", rec.Count())
	}
}

// Many clients pushing large compressed payloads at once over TCP: the buffers the connections
// hold before admission stay within the limiter's bound. Without the limiter every connection
// holds its request and a decompression buffer at once (hundreds of MiB here). Request buffers
// grow as their bytes arrive, so under this overload some requests wait holding a part of
// their body while the budget is taken: after -intake.wait they are throttled and give their
// bytes back, and their clients push again, as KIP-714 clients do. Every push gets through.
func TestManyConcurrentPushesBoundedMemory(t *testing.T) {
	const clients = 256
	const maxBytes = 8 << 20
	const decodes = 4
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: maxBytes, MaxDecodes: decodes, Wait: 100 * time.Millisecond})
	cfg := testConfig()
	cfg.Limiter = lim
	cfg.MaxConnections = clients
	cfg.ReadTimeout = time.Minute
	rec := &testkit.Recorder{}
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
	bufferedHigh.Store(buffered.Load())
	codes := make([]int16, clients)
	for i := range codes {
		codes[i] = -1
	}
	throttled := 0
	for round := 0; ; round++ {
		if round > 100 {
			t.Fatalf("pushes still throttled after 100 rounds: %v", codes)
		}
		clk.Advance(2 * time.Second) // past the push interval
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range conns {
			if codes[i] == errNone {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				codes[i] = conns[i].push(subs[i].ClientInstanceID, subs[i].SubscriptionID, 4, payloads[i%len(payloads)], false)
			}()
		}
		close(start)
		wg.Wait()
		left := 0
		for i, code := range codes {
			switch code {
			case errNone:
			case errThrottlingQuotaExceeded:
				left++
			default:
				t.Fatalf("client %d: code %d, want 0 or a throttle", i, code)
			}
		}
		throttled += left
		if left == 0 {
			break
		}
	}
	if rec.Count() != clients {
		t.Fatalf("%d pushes forwarded, want %d", rec.Count(), clients)
	}
	t.Logf("%d pushes throttled on the way", throttled)
	// Request buffers past the first, and decompression buffers, take their capacity from the
	// limiter (a pooled buffer of a tier may have grown to just under twice it); each decode
	// holds a labelled body of at most twice the telemetry limit besides; every connection may
	// hold a first buffer and a small response buffer.
	bound := int64(2*maxBytes + 2*decodes*(pool.Cap(cfg.TelemetryMaxBytes)+pool.Cap(2*cfg.TelemetryMaxBytes)) + clients*pool.Cap(smallBufSize+1))
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
