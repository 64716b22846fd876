package hostile

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
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
// and the same as OTLP/gRPC calls, while the well-behaved client sends beside them. Every two bytes of such a body become a
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
			// The witness's requests that found the budget taken by the attack are counted too.
			if got, want := max(busy, 0)+max(large, 0), concurrent*rounds; got < float64(want) || got > float64(want+w.refused("http")) {
				t.Errorf("refused requests counted as intake_bytes or too_large: %v, want %d and at most the witness's %d refusals more", got, want, w.refused("http"))
			}
			if rss > bound {
				t.Errorf("peak RSS %d MiB, above the %d MiB the limits allow", rss>>20, bound>>20)
			}
		})
	}
	// The same body as OTLP/gRPC v1 Export calls: the gRPC intake admits through the same
	// steps and the same budget.
	t.Run("grpc", func(t *testing.T) {
		g := startGate(t, "-resource.set", "amplified="+value,
			"-intake.max-bytes", "64MiB", "-queue.max-bytes", "64MiB", "-http.max-request-bytes", "16MiB")
		w := watch(t, g, 100*time.Millisecond, 5*time.Second)
		w.waitServed(t, 2, 30*time.Second)
		conn, err := grpc.NewClient(g.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil))))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var mu sync.Mutex
		answers := map[codes.Code]int{}
		var wg sync.WaitGroup
		for range concurrent {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					var req, resp codec.Raw
					req.SetBytes(plain)
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					err := conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &req, &resp)
					cancel()
					resp.Release()
					mu.Lock()
					answers[status.Code(err)]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		w.waitServed(t, 2, 30*time.Second)
		w.end(t, time.Second)
		g.alive(t)

		rss := g.PeakRSS(t)
		busy := max(g.metric(t, "otlpgate_grpc_refused_requests_total", `protocol="v1"`, `reason="intake_bytes"`, `signal="traces"`), 0)
		large := max(g.metric(t, "otlpgate_grpc_refused_requests_total", `protocol="v1"`, `reason="too_large"`, `signal="traces"`), 0)
		t.Logf("answers %v; refused intake_bytes %v, too_large %v; peak RSS %d MiB (bound %d MiB)", answers, busy, large, rss>>20, bound>>20)
		if answers[codes.ResourceExhausted] != concurrent*rounds {
			t.Errorf("attack calls answered %v, want %d × RESOURCE_EXHAUSTED", answers, concurrent*rounds)
		}
		if got, want := busy+large, concurrent*rounds; got < float64(want) || got > float64(want+w.refused("grpc")) {
			t.Errorf("refused calls counted as intake_bytes or too_large: %v, want %d and at most the witness's %d refusals more", got, want, w.refused("grpc"))
		}
		if rss > bound {
			t.Errorf("peak RSS %d MiB, above the %d MiB the limits allow", rss>>20, bound>>20)
		}
	})
}

// refused returns how many of the well-behaved client's requests on intake were refused.
// Call after end.
func (w *witness) refused(intake string) int {
	n := 0
	for _, r := range w.refusals {
		if r.intake == intake {
			n++
		}
	}
	return n
}
