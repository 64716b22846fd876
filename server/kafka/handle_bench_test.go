package kafka

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// benchConn returns a connection of a server that is not started, with a fake clock.
func benchConn(b *testing.B) (*conn, *testkit.Clock, *kmsg.RequestFormatter) {
	s := fuzzServer(b)
	clk := newClock()
	s.now = clk.Now
	p1, p2 := net.Pipe()
	b.Cleanup(func() { p1.Close(); p2.Close() })
	return newConn(s, p1), clk, kmsg.NewRequestFormatter(kmsg.FormatterClientID("kip714-probe"))
}

func BenchmarkHandle(b *testing.B) {
	c, _, f := benchConn(b)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "librdkafka", "2.15.1"
	get := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	get.ClientInstanceID = newID()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	for _, tc := range []struct {
		name string
		req  kmsg.Request
	}{{"ApiVersions", av}, {"Metadata", md}, {"GetTelemetrySubscriptions", get}} {
		req := f.AppendRequest(nil, tc.req, 1)[4:]
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				if _, ok := c.handle(req); !ok {
					b.Fatal("not answered")
				}
			}
		})
	}
}

// captureConn returns a connection whose instance has fetched its subscription, and the
// captured push carrying that subscription's id, with the push interval.
func captureConn(tb testing.TB, pc *parsedCapture) (*conn, *testkit.Clock, []byte, time.Duration) {
	tb.Helper()
	s := fuzzServer(tb)
	clk := newClock()
	s.now = clk.Now
	p1, p2 := net.Pipe()
	tb.Cleanup(func() { p1.Close(); p2.Close() })
	c := newConn(s, p1)
	get := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	get.ClientInstanceID = pc.req.ClientInstanceID
	resp, ok := c.handle((&kmsg.RequestFormatter{}).AppendRequest(nil, get, 1)[4:])
	if !ok {
		tb.Fatal("Get not answered")
	}
	var sub kmsg.GetTelemetrySubscriptionsResponse
	if err := sub.ReadFrom(resp[9:]); err != nil {
		tb.Fatal(err)
	}
	return c, clk, pc.withSubID(sub.SubscriptionID)[4:], time.Duration(sub.PushIntervalMillis) * time.Millisecond
}

// BenchmarkPushCapture handles each real push end to end (checks, decompression, scan,
// filter, labels, hand-over) without the socket. Bytes are the decompressed MetricsData.
// TestPushCaptureAllocs holds it to zero allocations.
func BenchmarkPushCapture(b *testing.B) {
	for _, file := range captureFiles(b) {
		pc := loadCapture(b, file)
		b.Run(pc.name, func(b *testing.B) {
			c, clk, req, interval := captureConn(b, pc)
			before := counterValue(b, exportedPushes)
			b.ReportAllocs()
			b.SetBytes(int64(len(pc.wantBytes)))
			for b.Loop() {
				clk.Advance(interval)
				if _, ok := c.handle(req); !ok {
					b.Fatal("not answered")
				}
			}
			if counterValue(b, exportedPushes) == before {
				b.Fatal("no push was exported")
			}
		})
	}
}

func BenchmarkParseHeader(b *testing.B) {
	file := captureFiles(b)[0]
	req := readFile(b, file)[4:]
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	var h header
	for b.Loop() {
		if parsePrefix(req, &h) != nil || parseHeader(req, &h, true) != nil || !checkBody(h.key, h.version, h.body) {
			b.Fatal("capture does not parse")
		}
	}
}
