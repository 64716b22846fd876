package hostile

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/ziptest"
)

// emptyEntries is an OTLP traces request body of size bytes, every two of them an empty
// ResourceSpans (tag 1, length 0): the most resource entries a body of that size can hold,
// each of which -resource.set turns into a Resource holding the set attributes.
func emptyEntries(size int) []byte {
	return bytes.Repeat([]byte{0x0a, 0x00}, size/2)
}

// postAll sends body, rounds times from each of concurrent clients, to url as content type
// ct (and Content-Encoding enc when not empty), and returns how many were answered with each
// status.
func postAll(t testing.TB, url, ct, enc string, body []byte, concurrent, rounds int) map[int]int {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: concurrent}}
	defer hc.CloseIdleConnections()
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Content-Type", ct)
				if enc != "" {
					req.Header.Set("Content-Encoding", enc)
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Errorf("POST: %v", err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return statuses
}

// TestResourceSetAmplificationBounded sends OTLP/HTTP bodies of nothing but empty resource
// entries to otlpgate running -resource.set with a 200-byte value, as they are and gzipped,
// while the well-behaved client sends beside them. Every two bytes of such a body become a
// Resource of about 210: 4 MiB inflate to 420 MiB of rewritten output, which used to be
// charged to no limit (one 16 MiB body took the process to 3.9 GiB). Processing now charges
// what it writes to the intake limiter as it grows, and refuses the request once its output
// would pass -queue.max-bytes or find no room in -intake.max-bytes, before the rest is built.
// Each attack request must be refused and counted (intake_bytes or too_large), the witness
// served throughout, and the peak resident memory stay within what the flags allow:
//
//	2 × -intake.max-bytes (64 MiB): the bodies, their inflated copies and the processed
//	    output being charged, and as much again in garbage the collector has not yet
//	    reclaimed (GOGC=100);
//	+ -queue.max-bytes (64 MiB): what is admitted (the witness's requests);
//	+ 64 MiB at rest: the runtime, the pools' spare buffers, the witness's traffic;
//	= 256 MiB.
func TestResourceSetAmplificationBounded(t *testing.T) {
	const (
		size       = 4 << 20
		concurrent = 2
		rounds     = 2
		intake     = 64 << 20
		queue      = 64 << 20
		atRest     = 64 << 20
		bound      = 2*intake + queue + atRest
	)
	value := strings.Repeat("v", 200)
	plain := emptyEntries(size)
	for _, tc := range []struct {
		name string
		enc  string
		body []byte
	}{
		{"plain", "", plain},
		{"gzip", "gzip", ziptest.Gzip(t, plain)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGate(t, "-resource.set", "amplified="+value,
				"-intake.max-bytes", "64MiB", "-queue.max-bytes", "64MiB", "-http.max-request-bytes", "16MiB")
			w := watch(t, g, 100*time.Millisecond, 5*time.Second)
			w.waitServed(t, 2, 30*time.Second)
			t.Logf("attack body: %d bytes, %d empty resource entries", len(tc.body), size/2)

			statuses := postAll(t, "http://"+g.HTTP+"/v1/traces", "application/x-protobuf", tc.enc, tc.body, concurrent, rounds)
			w.waitServed(t, 2, 30*time.Second)
			w.end(t, time.Second) // -intake.wait, the default
			g.alive(t)

			rss := g.PeakRSS(t)
			busy := g.metric(t, "otlpgate_http_refused_requests_total", `reason="intake_bytes"`, `signal="traces"`)
			large := g.metric(t, "otlpgate_http_refused_requests_total", `reason="too_large"`, `signal="traces"`)
			high := g.metric(t, "otlpgate_intake_bytes_in_flight_high_water")
			t.Logf("answers %v; refused intake_bytes %v, too_large %v; limiter high water %.1f MiB; peak RSS %d MiB (bound %d MiB)",
				statuses, busy, large, high/(1<<20), rss>>20, bound>>20)
			for code, n := range statuses {
				if code != http.StatusTooManyRequests && code != http.StatusRequestEntityTooLarge {
					t.Errorf("%d attack requests answered %d, want 429 (no room in the intake limiter) or 413 (larger than the queue once processed)", n, code)
				}
			}
			if got, want := max(busy, 0)+max(large, 0), float64(concurrent*rounds); got != want {
				t.Errorf("refused requests counted as intake_bytes or too_large: %v, want %v", got, want)
			}
			if rss > bound {
				t.Errorf("peak RSS %d MiB, above the %d MiB the limits allow", rss>>20, bound>>20)
			}
		})
	}
}
