package httpserver

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
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

// A protobuf body that opens a batch alone becomes the batch without a copy, and the scratch
// keeps no part of it: the body buffer the handler returns to the pool (scribbled over in race
// builds, see release) is another, so the destination gets each exact body even while the
// next request reuses the pool. A body that joins an open batch, or arrived compressed, is
// copied as before.
func TestBodyAdoptedIntoBatch(t *testing.T) {
	pc := testPipelineConfig()
	e := start(t, pc, DefaultConfig(), nil)
	bodies := [][]byte{traces(t, 11, 1000), traces(t, 12, 1001), traces(t, 13, 1002)}
	if bytes.Equal(bodies[0][:1000], bodies[1][:1000]) {
		t.Fatal("the bodies start alike: a body read over another would go unnoticed")
	}
	adopted := testkit.Counter(t, "otlpgate_fastpath_adopted_bytes_total")
	for i, body := range bodies {
		if r := e.post(t, "/v1/traces", body); r.status != 200 {
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
		if i == 0 {
			// The first opened the batch; the others join it (copied).
			if got := testkit.Counter(t, "otlpgate_fastpath_adopted_bytes_total") - adopted; got != float64(len(body)) {
				t.Fatalf("adopted %v bytes, want the first body's %d", got, len(body))
			}
		}
	}
	if got := testkit.Counter(t, "otlpgate_fastpath_adopted_bytes_total") - adopted; got != float64(len(bodies[0])) {
		t.Fatalf("adopted %v bytes, want the first body's %d alone", got, len(bodies[0]))
	}
	zipped := gzipped(t, bodies[2])
	if r := e.do(t, http.MethodPost, "/v1/traces", map[string]string{"Content-Type": ctProto, "Content-Encoding": "gzip"}, zipped); r.status != 200 {
		t.Fatalf("gzip: %d %q", r.status, r.body)
	}
	e.p.Flush()
	want := bytes.Join([][]byte{bodies[0], bodies[1], bodies[2], bodies[2]}, nil)
	if got, items := e.rec.Payload(); items != 1000+1001+2*1002 || !bytes.Equal(got, want) {
		t.Fatalf("destination got %d items (%d bytes), want the four exact bodies (%d bytes)", items, len(got), len(want))
	}
}
