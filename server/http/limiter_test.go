package httpserver

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// inflating is a valid traces request of one span whose attribute value is size bytes of one
// letter: it compresses about a thousand times.
func inflating(t *testing.T, size int) []byte {
	t.Helper()
	req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
			TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: "bomb",
			Attributes: []*commonv1.KeyValue{{Key: "k", Value: &commonv1.AnyValue{
				Value: &commonv1.AnyValue_StringValue{StringValue: strings.Repeat("a", size)}}}},
		}}}},
	}}}
	b, err := req.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A compressed body is inflated into buffers whose bytes are taken from the intake limiter
// before anything is inflated into them: the limiter's high-water mark shows the inflated
// size, not the few KiB on the wire, and when the limiter has no room for the inflated body
// the request is refused like any other it cannot hold (429, Retry-After, RESOURCE_EXHAUSTED),
// nothing is delivered, the connection serves the next request, and the same request succeeds
// once there is room. For gzip and zstd alike.
func TestDecompressionHoldsIntakeLimiter(t *testing.T) {
	const inflated = 12 << 20
	plain := inflating(t, inflated)
	for _, tc := range []struct {
		coding string
		body   []byte
	}{{"gzip", gzipped(t, plain)}, {"zstd", zstded(t, plain)}} {
		t.Run(tc.coding, func(t *testing.T) {
			lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 64 << 20, Wait: 30 * time.Millisecond})
			sc := DefaultConfig()
			sc.MaxRequestBytes = 16 << 20
			sc.Limiter = lim
			e := start(t, testPipelineConfig(), sc, nil)
			hdr := map[string]string{"Content-Type": ctProto, "Content-Encoding": tc.coding}
			if len(tc.body) > 64<<10 {
				t.Fatalf("the %s body is %d bytes, not a bomb", tc.coding, len(tc.body))
			}

			// Room for the wire bytes, not for the inflated ones.
			const held = 64<<20 - 4<<20
			if !lim.AcquireBytes(admission.IntakeHTTP, held, nil) {
				t.Fatal("cannot fill the limiter")
			}
			refused := intakeRefused(t, "http", "bytes")
			busy := testutil.ToFloat64(ctr.rejected[rejectBusy])
			r := e.do(t, http.MethodPost, "/v1/traces", hdr, tc.body)
			wantStatus(t, r, 429, codes.ResourceExhausted, msgBusy)
			if got := r.header.Get("Retry-After"); got != "1" || r.header.Get("Connection") == "close" {
				t.Fatalf("Retry-After %q, Connection %q; want \"1\" and a connection kept", got, r.header.Get("Connection"))
			}
			if got := intakeRefused(t, "http", "bytes") - refused; got != 1 {
				t.Fatalf("otlpgate_intake_refused_total{intake=http,resource=bytes} grew by %v, want 1", got)
			}
			if got := testutil.ToFloat64(ctr.rejected[rejectBusy]) - busy; got != 1 {
				t.Fatalf("otlpgate_http_rejected_requests_total{reason=intake_busy} grew by %v, want 1", got)
			}
			if lim.HighWaterBytes() > 64<<20 {
				t.Fatalf("high water %d past the budget", lim.HighWaterBytes())
			}
			wantNothingReceived(t, e)

			lim.ReleaseBytes(admission.IntakeHTTP, held)
			if r := e.do(t, http.MethodPost, "/v1/traces", hdr, tc.body); r.status != 200 {
				t.Fatalf("with room: %d %q", r.status, r.body)
			}
			e.p.Flush()
			if got, items := e.rec.Payload(); items != 1 || !bytes.Equal(got, plain) {
				t.Fatalf("destination got %d items (%d bytes), want the inflated request (%d bytes)", items, len(got), len(plain))
			}
			if h := lim.HighWaterBytes(); h < inflated {
				t.Fatalf("limiter high water %d, want at least the %d inflated bytes", h, inflated)
			}
			if lim.Bytes() != 0 {
				t.Fatalf("limiter holds %d bytes after the requests", lim.Bytes())
			}
		})
	}
}

// Clients that declare large bodies and stall hold about what they sent, not what they
// declared: four of them, each announcing -http.max-request-bytes and sending 9000 bytes (past
// the 8KiB fasthttp reads before the handler runs), used to take the whole budget until
// -http.read-timeout, and every other client got 429. A well-behaved client beside them is
// served throughout.
func TestStalledBodiesDoNotLockOutOthers(t *testing.T) {
	const maxBody = 2 << 20
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 2 * maxBody, Wait: 50 * time.Millisecond})
	sc := DefaultConfig()
	sc.MaxRequestBytes = maxBody
	sc.Limiter = lim
	e := start(t, testPipelineConfig(), sc, nil)
	const (
		stalled  = 4
		firstBuf = 64 << 10 // the first body buffer of a request that declared more
	)
	for range stalled {
		c := dial(t, e)
		fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n%s",
			maxBody, bytes.Repeat([]byte{0x0a}, 9000))
	}
	// Wait (boundedly) until the stalled requests hold what they will hold: each its first body
	// buffer (or, as before, its whole Content-Length, which filled the budget).
	for i := 0; lim.Bytes() < min(stalled*firstBuf, 2*maxBody); i++ {
		if i > 2000 {
			t.Fatalf("the stalled requests hold %d bytes", lim.Bytes())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := lim.Bytes(); got > stalled*firstBuf {
		t.Fatalf("%d stalled requests that sent 9000 bytes each hold %d bytes", stalled, got)
	}
	body := traces(t, 3, 2)
	for i := range 20 {
		if r := e.post(t, "/v1/traces", body); r.status != 200 {
			t.Fatalf("well-behaved request %d beside the stalled ones: %d %q", i, r.status, r.body)
		}
	}
	e.p.Flush()
	if _, items := e.rec.Payload(); items != 40 {
		t.Fatalf("destination got %d items, want the 40 spans of the well-behaved requests", items)
	}
}

// intakeRefused reads otlpgate_intake_refused_total{intake, resource} from the default
// registry, as a scrape would; 0 before the first refusal.
func intakeRefused(t *testing.T, intake, resource string) float64 {
	t.Helper()
	return testkit.Counter(t, "otlpgate_intake_refused_total", "intake", intake, "resource", resource)
}
