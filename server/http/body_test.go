package httpserver

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/pool"
)

// A body of known length is read into its first buffer, then into one buffer of its whole
// length: the limiter's high-water mark is those two buffers, not the last two of a doubling
// (half the body's buffer again), and the destination gets the exact body.
func TestBodyBufferSizedFromContentLength(t *testing.T) {
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 128 << 20, Wait: 30 * time.Millisecond})
	sc := DefaultConfig()
	sc.Limiter = lim
	e := start(t, testPipelineConfig(), sc, nil)
	body := traces(t, 7, 3000)
	if len(body) < 4*firstRead || pool.Cap(len(body)) < len(body)+firstRead {
		t.Fatalf("a body of %d bytes does not tell one step from a doubling", len(body))
	}
	if r := e.post(t, "/v1/traces", body); r.status != 200 {
		t.Fatalf("%d %q", r.status, r.body)
	}
	e.p.Flush()
	if got, items := e.rec.Payload(); items != 3000 || !bytes.Equal(got, body) {
		t.Fatalf("destination got %d items (%d bytes), want the %d-byte request", items, len(got), len(body))
	}
	if h, want := lim.HighWaterBytes(), int64(firstRead+pool.Cap(len(body))); h > want {
		t.Fatalf("limiter high water %d for a %d-byte body, want at most %d (first buffer and the body's)", h, len(body), want)
	}
	if lim.Bytes() != 0 {
		t.Fatalf("limiter holds %d bytes after the request", lim.Bytes())
	}
}

// A client whose Content-Length lies (it declares -http.max-request-bytes, sends more than a
// first buffer, and stalls) holds no more than a buffer of the declared size, which the limit
// caps; where the limiter has no room for that, it is refused (429) rather than given memory
// the limiter did not grant, and a well-behaved client is served beside it.
func TestLyingContentLengthBounded(t *testing.T) {
	const maxBody = 2 << 20
	for _, tc := range []struct {
		name     string
		held     int64 // taken from the limiter beforehand
		wantHeld int64 // what the liar holds while it stalls
		refused  bool
	}{
		{"room", 0, int64(pool.Cap(maxBody)), false},
		{"no room", 4*maxBody - maxBody/2, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 4 * maxBody, Wait: 30 * time.Millisecond})
			if tc.held > 0 && !lim.AcquireBytes(admission.IntakeHTTP, tc.held, nil) {
				t.Fatal("cannot fill the limiter")
			}
			sc := DefaultConfig()
			sc.MaxRequestBytes = maxBody
			sc.Limiter = lim
			e := start(t, testPipelineConfig(), sc, nil)
			c := dial(t, e)
			fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n%s",
				maxBody, bytes.Repeat([]byte{0x0a}, 2*firstRead))
			if tc.refused {
				br := bufio.NewReader(c)
				r := readResponse(t, br)
				if r.status != 429 {
					t.Fatalf("liar without room: %d %q, want 429", r.status, r.body)
				}
			} else {
				for i := 0; lim.Bytes() != tc.held+tc.wantHeld; i++ {
					if i > 2000 {
						t.Fatalf("the stalled liar holds %d bytes, want %d", lim.Bytes(), tc.wantHeld)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if h := lim.HighWaterBytes() - tc.held; h > firstRead+int64(pool.Cap(maxBody)) {
				t.Fatalf("limiter high water %d, past a first buffer and one of the limit", h)
			}
			body := traces(t, 3, 2)
			if r := e.post(t, "/v1/traces", body); r.status != 200 {
				t.Fatalf("well-behaved request beside the liar: %d %q", r.status, r.body)
			}
			c.Close()
			for i := 0; lim.Bytes() != tc.held; i++ {
				if i > 2000 {
					t.Fatalf("limiter holds %d bytes after the liar left", lim.Bytes())
				}
				time.Sleep(5 * time.Millisecond)
			}
			e.p.Flush()
			if got, items := e.rec.Payload(); items != 2 || !bytes.Equal(got, body) {
				t.Fatalf("destination got %d items, want only the 2 spans of the well-behaved request", items)
			}
		})
	}
}
