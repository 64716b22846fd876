//go:build !race

package kafka

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

func TestHandleAllocs(t *testing.T) {
	s := fuzzServer(t)
	clk := newClock()
	s.now = clk.Now
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := newConn(s, a)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("alloc"))
	enc := func(r kmsg.Request) []byte { return f.AppendRequest(nil, r, 9)[4:] }

	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "librdkafka", "2.15.1"
	avReq := enc(av)
	tooNew := kmsg.NewPtrApiVersionsRequest()
	tooNew.Version = 9
	tooNewReq := enc(tooNew)

	get := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	resp, ok := c.handle(enc(get))
	if !ok {
		t.Fatal("Get not answered")
	}
	var sub kmsg.GetTelemetrySubscriptionsResponse
	if err := sub.ReadFrom(resp[9:]); err != nil {
		t.Fatal(err)
	}
	get.ClientInstanceID = sub.ClientInstanceID
	getReq := enc(get)

	push := kmsg.NewPtrPushTelemetryRequest()
	push.ClientInstanceID, push.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID
	push.Metrics, _ = testMetrics("m").MarshalVT()
	okPush := enc(push)
	push.CompressionType = 9
	badCodec := enc(push)

	pushCode := func(resp []byte) int16 {
		var r kmsg.PushTelemetryResponse
		if err := r.ReadFrom(resp[9:]); err != nil {
			t.Fatal(err)
		}
		return r.ErrorCode
	}
	for _, tc := range []struct {
		name string
		req  []byte
		code int16 // of a push
		each func()
		// setup runs once: the throttled case needs one accepted push first.
		setup func()
	}{
		{"ApiVersions", avReq, 0, nil, nil},
		{"ApiVersions too new", tooNewReq, 0, nil, nil},
		{"GetTelemetrySubscriptions", getReq, 0, nil, nil},
		{"PushTelemetry accepted", okPush, errNone, func() { clk.Advance(time.Minute) }, nil},
		{"PushTelemetry throttled", okPush, errThrottlingQuotaExceeded, nil, func() {
			clk.Advance(time.Minute)
			if code := pushCode(mustHandle(t, c, okPush)); code != errNone {
				t.Fatalf("first push: %d", code)
			}
		}},
		{"PushTelemetry bad codec", badCodec, errUnsupportedCompressionType, func() { clk.Advance(time.Second) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func() {
				if tc.each != nil {
					tc.each()
				}
				resp := mustHandle(t, c, tc.req)
				if tc.code != 0 {
					if code := pushCode(resp); code != tc.code {
						t.Fatalf("code %d, want %d", code, tc.code)
					}
				}
			}
			if tc.setup != nil {
				tc.setup()
			}
			run()
			allocs := testing.AllocsPerRun(200, run)
			if allocs != 0 {
				t.Fatalf("%v allocations per request, want 0", allocs)
			}
		})
	}
}

// TestPushCaptureAllocs proves that every real push, accepted, goes through decompression, the
// full-depth scan, filtering, labelling and the hand-over without allocating, also to a
// consumer told the connection's address (-resource.from-peer).
func TestPushCaptureAllocs(t *testing.T) {
	for _, file := range captureFiles(t) {
		pc := loadCapture(t, file)
		for _, from := range []bool{false, true} {
			name := pc.name
			if from {
				name += "/from-peer"
			}
			t.Run(name, func(t *testing.T) { testPushCaptureAllocs(t, pc, from) })
		}
	}
}

func testPushCaptureAllocs(t *testing.T, pc *parsedCapture, from bool) {
	c, clk, req, interval := captureConn(t, pc)
	if from {
		c.next = &fromConsumer{&testkit.Discard{}, pipeline.Origin{Peer: netip.MustParseAddr("192.0.2.7")}}
	}
	before := counterValue(t, exportedPushes)
	run := func() {
		clk.Advance(interval)
		resp := mustHandle(t, c, req)
		var r kmsg.PushTelemetryResponse
		if err := r.ReadFrom(resp[9:]); err != nil || r.ErrorCode != errNone {
			t.Fatalf("push answered %d (%v)", r.ErrorCode, err)
		}
	}
	run()
	allocs := testing.AllocsPerRun(100, run)
	if allocs != 0 {
		t.Fatalf("%v allocations per accepted push, want 0", allocs)
	}
	// The warm-up and 100 measured runs, plus the one AllocsPerRun adds.
	if got := counterValue(t, exportedPushes) - before; got != 102 {
		t.Fatalf("%v pushes exported, want 102", got)
	}
}

func mustHandle(t testing.TB, c *conn, req []byte) []byte {
	resp, ok := c.handle(req)
	if !ok {
		t.Fatal("not answered")
	}
	return resp
}

func TestParseHeaderAllocs(t *testing.T) {
	var reqs [][]byte
	for _, file := range captureFiles(t) {
		reqs = append(reqs, readFile(t, file)[4:])
	}
	var h header
	allocs := testing.AllocsPerRun(100, func() {
		for _, req := range reqs {
			if parsePrefix(req, &h) != nil || parseHeader(req, &h, true) != nil || !checkBody(h.key, h.version, h.body) {
				t.Fatal("capture does not parse")
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations, want 0", allocs)
	}
}
