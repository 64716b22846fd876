package main

import (
	"bytes"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// gzipLoad posts gzip OTLP/HTTP protobuf requests of ten spans each to a gateway from several
// workers, and keeps the span ids of every request answered 200.
type gzipLoad struct {
	mu    sync.Mutex
	next  uint32
	sent  map[pcommon.SpanID]bool
	acked []pcommon.SpanID
}

// body builds the next request, gzip-compressed, and notes its span ids as sent.
func (l *gzipLoad) body() ([]byte, []pcommon.SpanID) {
	l.mu.Lock()
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	var ids []pcommon.SpanID
	for range 10 {
		l.next++
		id := pcommon.SpanID{0xdd, 0, 0, 0, byte(l.next >> 24), byte(l.next >> 16), byte(l.next >> 8), byte(l.next)}
		sp := spans.AppendEmpty()
		sp.SetName("op")
		sp.SetTraceID(pcommon.TraceID{0xdd, 1})
		sp.SetSpanID(id)
		sp.Attributes().PutStr("http.route", "/checkout/{id}")
		l.sent[id] = true
		ids = append(ids, id)
	}
	l.mu.Unlock()
	plain, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(plain)
	w.Close()
	return z.Bytes(), ids
}

// run posts from workers goroutines until stop is closed or the gateway stops answering.
func (l *gzipLoad) run(url string, workers int, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: 10 * time.Second}
			for fails := 0; fails < 20; {
				select {
				case <-stop:
					return
				default:
				}
				body, ids := l.body()
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/x-protobuf")
				req.Header.Set("Content-Encoding", "gzip")
				resp, err := hc.Do(req)
				if err != nil {
					fails++
					time.Sleep(10 * time.Millisecond)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					l.mu.Lock()
					l.acked = append(l.acked, ids...)
					l.mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
}

// A kill -9 under a load of gzip requests spooled as they arrived, while the upstream (the
// Collector's confighttp and pdata) answers 503 and then takes them: after a start on the same
// spool every span of every request answered 200 arrives, nothing arrives that was never sent,
// and the upstream could decode every request it got, whatever the kill tore.
func TestBinarySpoolPassThroughKill9UnderLoad(t *testing.T) {
	bin := buildBinary(t)
	up := startCollectorHTTP(t)
	up.down.Store(true)
	dir := t.TempDir()
	start := func() *gateway {
		g := startGateway(t, bin, "-spool.dir", dir, "-batch.max-age", "5ms",
			"-dest", "name=up,endpoint="+up.url+",protocol=http,compression=gzip,retry-initial=20ms,retry-max=100ms")
		waitReady(t, g)
		return g
	}
	g := start()
	l := &gzipLoad{sent: map[pcommon.SpanID]bool{}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run("http://"+g.http+"/v1/traces", 4, stop)
	}()
	testkit.WaitFor(t, "a few hundred requests acknowledged", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.acked) >= 3000
	})
	if c := scrape(t, g.admin, "otlpgate_fastpath_passthrough_requests_total", `way="compressed"`); c < 300 {
		t.Fatalf("%v requests kept compressed, want every one of the 300 or more acknowledged", c)
	}
	kill9(t, g) // under load: appends and retries in flight
	close(stop)
	<-done

	up.down.Store(false)
	start()
	l.mu.Lock()
	acked, sent := append([]pcommon.SpanID(nil), l.acked...), l.sent
	l.mu.Unlock()
	testkit.WaitFor(t, "every acknowledged span upstream", func() bool {
		got, _ := up.spans()
		for _, id := range acked {
			if got[id] == 0 {
				return false
			}
		}
		return true
	})
	got, bad := up.spans()
	for id := range got {
		if !sent[id] {
			t.Fatalf("span %v arrived but was never sent", id)
		}
	}
	if bad != 0 {
		t.Fatalf("the upstream could not decode %d requests", bad)
	}
	dups := 0
	for _, n := range got {
		dups += n - 1
	}
	t.Logf("%d spans acknowledged, %d arrived (requests unanswered at the kill may arrive too), %d duplicates", len(acked), len(got), dups)
}
