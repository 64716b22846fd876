package hostile

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
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
//	    size, 4 × 16 MiB (this body writes a few hundred bytes into it);
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
