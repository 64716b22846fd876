package uds

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// TestConnectionChurn opens and closes 10,000 connections, half of them after writing part of
// a message: every close is handled, every partial message counted as truncated, and the
// descriptors, goroutines and watched connections come back to what they were.
func TestConnectionChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 connections")
	}
	const total, workers = 10000, 8
	truncated := counter(discarded[ocdaemon.ReasonTruncated])
	h := start(t, nil)
	// A first connection creates whatever the loops create lazily before the baseline.
	h.replay(newStream(1).init().buf, 0)
	fds, goroutines := testkit.OpenFDs(t), runtime.NumGoroutine()
	closed := h.s.closed.Load()

	hdr := ocdaemon.Header{Type: ocdaemon.TraceExport, Seq: 1, PID: 9, Time: 1795262752.5, Len: 500}
	partial := append(ocdaemon.AppendHeader(nil, &hdr), `[{"traceId":"0af7`...)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += workers {
				c, err := dialRetry(h.path)
				if err != nil {
					t.Errorf("dial %d: %v", i, err)
					return
				}
				if i%2 == 0 {
					if _, err := c.Write(partial); err != nil {
						t.Errorf("write %d: %v", i, err)
					}
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	testkit.WaitFor(t, "every close to be handled", func() bool { return h.s.closed.Load() == closed+total })
	if d := counter(discarded[ocdaemon.ReasonTruncated]) - truncated; d != total/2 {
		t.Errorf("truncated messages %v, want %d", d, total/2)
	}
	if n, w := h.s.conns.Load(), h.s.watch.len(); n != 0 || w != 0 {
		t.Errorf("%d connections counted open, %d watched", n, w)
	}
	testkit.WaitFor(t, "descriptors and goroutines to come back", func() bool {
		return testkit.OpenFDs(t) <= fds && runtime.NumGoroutine() <= goroutines
	})
	// The server still serves.
	h.replay(newStream(2).init().spans("after").buf, 0)
	if got := spanNames(t, h.rec.Received())[2]; len(got) != 1 || got[0] != "after" {
		t.Fatalf("spans after the churn: %v", got)
	}
}

// dialRetry dials the socket, waiting while its accept queue is full: connecting clients
// outpace the acceptor here, and a unix socket refuses with EAGAIN rather than queueing more.
func dialRetry(path string) (net.Conn, error) {
	for i := 0; ; i++ {
		c, err := net.Dial("unix", path)
		if err == nil || !errors.Is(err, syscall.EAGAIN) || i == 10000 {
			return c, err
		}
		time.Sleep(time.Millisecond)
	}
}
