package hostile

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// jsonCraftedBody is an OTLP/JSON traces request of exactly size bytes: one resource entry with
// spans spans, then an unknown field holding an array of zeros. A parsed tree spends a value
// and a pointer on every zero, about 260 times the bytes they take (4 GiB for 16 MiB, as the
// review measured); a stream passes over them with a counter.
func jsonCraftedBody(size, spans int) []byte {
	b := []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"crafted"}}]},"scopeSpans":[{"spans":[`)
	for i := range spans {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b1%02x","name":"span %d","kind":2}`, i, i)
	}
	b = append(b, `]}]}],"x":[0`...)
	tail := `]}`
	for len(b) < size-len(tail)-1 {
		b = append(b, ',', '0')
	}
	if len(b) < size-len(tail) {
		b = append(b, ' ')
	}
	return append(b, tail...)
}

// TestJSONCraftedConcurrent sends the review's crafted 16 MiB OTLP/JSON POST four at a time
// to otlpgate with its default flags, three rounds, while the well-behaved client sends beside
// them. Every crafted request must be answered 200 with its spans counted, the process must
// live, and its peak resident memory must stay within what the limits allow:
//
//	-intake.max-bytes (default 256 MiB): every body being received or transcoded holds this
//	    much of the intake limiter, so it bounds the request bodies in memory at once (here
//	    4 × 16 MiB, the rest is room for bodies the garbage collector has not yet reclaimed);
//	+ output buffers: each request in flight transcodes into one pooled buffer of its body's
//	    size, 4 × 16 MiB (this body writes a few hundred bytes into it; the buffers are
//	    charged to the limiter now, so this term is room to spare);
//	+ fixed overhead: 64 MiB for the runtime, the pools, the witness's traffic and the
//	    transcoder's own state (a frame per nesting level, a bit per unknown level: KiB);
//	= 256 + 64 + 64 = 384 MiB.
//
// A parse tree of the same bodies held 4 GiB per request in the review (16.2 GiB for four).
func TestJSONCraftedConcurrent(t *testing.T) {
	const (
		size       = 16 << 20
		concurrent = 4
		rounds     = 3
		spans      = 5
		bound      = 256<<20 + concurrent*size + 64<<20
	)
	g := startGate(t)
	w := watch(t, g, 100*time.Millisecond, 5*time.Second)
	w.waitServed(t, 2, 30*time.Second)

	body := jsonCraftedBody(size, spans)
	if len(body) != size {
		t.Fatalf("crafted body is %d bytes, want %d", len(body), size)
	}
	hc := &http.Client{Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	errs := make(chan error, concurrent*rounds)
	for range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				req, err := http.NewRequest(http.MethodPost, "http://"+g.HTTP+"/v1/traces", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					errs <- err
					return
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("crafted POST answered %s: %s", resp.Status, msg)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	w.waitServed(t, 2, 30*time.Second)
	w.end(t, time.Second) // -intake.wait, the default
	g.alive(t)

	if got, want := g.metric(t, "otlpgate_http_received_items_total", `encoding="json"`, `signal="traces"`), float64(concurrent*rounds*spans); got != want {
		t.Errorf("JSON spans received: %v, want %v", got, want)
	}
	rss := g.PeakRSS(t)
	t.Logf("peak RSS %d MiB (bound %d MiB)", rss>>20, bound>>20)
	if rss > bound {
		t.Errorf("peak RSS %d MiB, above the %d MiB the limits allow", rss>>20, bound>>20)
	}
}

// jsonPackedBody is an OTLP/JSON metrics request of about size bytes: one histogram data
// point whose bucketCounts are zeros. Each "0," is two bytes of JSON and eight of protobuf (a
// packed fixed64), so the transcoded request is four times the body.
func jsonPackedBody(size int) []byte {
	b := []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"h","histogram":{"aggregationTemporality":2,"dataPoints":[{"count":"1","bucketCounts":[0`)
	tail := `]}]}}]}]}]}`
	for len(b) < size-len(tail)-1 {
		b = append(b, ',', '0')
	}
	return append(b, tail...)
}

// TestJSONPackedNumbersBounded sends OTLP/JSON bodies of packed zeros, which transcode to four
// times their size, two at a time, beside the well-behaved client. The transcoder's output
// used to grow by doubling, uncharged, while only the body was charged (one 64 MiB body
// peaked at 1.11 GiB, four at once at 3.0 GiB against 256 MiB limits); it is now charged to
// the intake limiter as it grows, and an output that would pass -http.max-request-bytes is
// refused 413 (body_too_large), one the limiter has no room for 429 (intake_bytes, or
// intake_busy when not even the body or the first output buffer found room), before the rest
// is built. Each attack request must be refused and counted, a body of the same shape that
// fits admitted whole, the witness served throughout, and the peak resident memory stay
// within what the flags allow:
//
//	2 × -intake.max-bytes (128 MiB): the bodies and the output being charged, and as much
//	    again in garbage the collector has not yet reclaimed (GOGC=100);
//	+ -queue.max-bytes (64 MiB): what is admitted;
//	+ 64 MiB of spare buffers the byte pool keeps through collections (its reserve's bound,
//	    maxReservedBytes in pool/reserve.go): the output's 1 to 32 MiB steps, given back as
//	    it grew, land there, one per tier;
//	+ 64 MiB at rest: the runtime, the binary, the witness's traffic;
//	= 448 MiB.
//
// (Without the reserve's term the bound was 384 MiB, and a run that filled the reserve
// peaked at 387 MiB.)
func TestJSONPackedNumbersBounded(t *testing.T) {
	const (
		size       = 32 << 20
		concurrent = 2
		rounds     = 2
		intake     = 128 << 20
		queue      = 64 << 20
		reserve    = 64 << 20
		atRest     = 64 << 20
		bound      = 2*intake + queue + reserve + atRest
	)
	g := startGate(t, "-intake.max-bytes", "128MiB", "-queue.max-bytes", "64MiB", "-http.max-request-bytes", "64MiB")
	w := watch(t, g, 100*time.Millisecond, 5*time.Second)
	w.waitServed(t, 2, 30*time.Second)

	body := jsonPackedBody(size)
	statuses := postAll(t, "http://"+g.HTTP+"/v1/metrics", "application/json", "", body, concurrent, rounds)
	// One that fits: 2 MiB of JSON, 8 MiB transcoded.
	fits := postAll(t, "http://"+g.HTTP+"/v1/metrics", "application/json", "", jsonPackedBody(2<<20), 1, 1)
	w.waitServed(t, 2, 30*time.Second)
	w.end(t, time.Second) // -intake.wait, the default
	g.alive(t)
	// The witness's OTLP/HTTP requests that found the limiter full while the attack held it
	// are counted as intake_busy too.
	witnessBusy := 0
	for _, r := range w.refusals {
		if r.intake == "http" && strings.HasPrefix(r.err, "429") {
			witnessBusy++
		}
	}

	rss := g.PeakRSS(t)
	busy := max(g.metric(t, "otlpgate_http_refused_requests_total", `encoding="json"`, `reason="intake_bytes"`, `signal="metrics"`), 0)
	tooLarge := max(g.metric(t, "otlpgate_http_rejected_requests_total", `reason="body_too_large"`), 0)
	unread := max(g.metric(t, "otlpgate_http_rejected_requests_total", `reason="intake_busy"`), 0)
	points := g.metric(t, "otlpgate_http_received_items_total", `encoding="json"`, `signal="metrics"`)
	high := g.metric(t, "otlpgate_intake_bytes_in_flight_high_water")
	t.Logf("answers %v, then %v; refused body_too_large %v, intake_bytes %v, intake_busy %v; data points received %v; limiter high water %.1f MiB; peak RSS %d MiB (bound %d MiB)",
		statuses, fits, tooLarge, busy, unread, points, high/(1<<20), rss>>20, bound>>20)
	if n := statuses[http.StatusRequestEntityTooLarge] + statuses[http.StatusTooManyRequests]; n != concurrent*rounds {
		t.Errorf("attack answers %v, want %d × 413 or 429", statuses, concurrent*rounds)
	}
	if got, want := tooLarge, float64(statuses[http.StatusRequestEntityTooLarge]); got != want {
		t.Errorf("requests rejected as body_too_large: %v, want %v", got, want)
	}
	if got, want := busy+unread, float64(statuses[http.StatusTooManyRequests]+witnessBusy); got != want {
		t.Errorf("requests refused as intake_bytes or intake_busy: %v, want %v (%d of the witness's)", got, want, witnessBusy)
	}
	if fits[http.StatusOK] != 1 {
		t.Errorf("a body that fits answered %v, want 200", fits)
	}
	if points != 1 {
		t.Errorf("JSON data points received: %v, want 1 (the body that fits)", points)
	}
	if rss > bound {
		t.Errorf("peak RSS %d MiB, above the %d MiB the limits allow", rss>>20, bound>>20)
	}
}
