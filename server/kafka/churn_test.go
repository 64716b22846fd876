package kafka

import (
	"net"
	"runtime"
	"sync"
	"testing"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// TestConnectionChurn opens and closes 10,000 connections, half of them after writing part of
// a request: each of those is counted as truncated, and the descriptors, goroutines and
// registered connections come back to what they were.
func TestConnectionChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 connections")
	}
	const total, workers = 10000, 8
	cfg := testConfig()
	// The server may lag behind the clients' closes; no connection may be refused for that.
	cfg.MaxConnections = total
	s, _ := startServer(t, cfg, &testkit.Recorder{})
	// A first conversation creates whatever is created lazily before the baseline.
	first := dial(t, s, "warm")
	first.apiVersions(3, "a", "1")
	first.nc.Close()
	conns := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.mu.conns)
	}
	testkit.WaitFor(t, "the first connection to be released", func() bool { return conns() == 0 })
	fds, goroutines := testkit.OpenFDs(t), runtime.NumGoroutine()
	truncated, rejected := counterValue(t, badTruncated), counterValue(t, rejectedConns)

	// A size prefix announcing 100 bytes, then the start of an ApiVersions header.
	partial := []byte{0, 0, 0, 100, 0, 18, 0, 3, 0, 0}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += workers {
				c, err := net.Dial("tcp", s.Addr().String())
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
	testkit.WaitFor(t, "every connection to be released", func() bool { return conns() == 0 })
	testkit.WaitFor(t, "descriptors and goroutines to come back", func() bool {
		return testkit.OpenFDs(t) <= fds && runtime.NumGoroutine() <= goroutines
	})
	testkit.WaitFor(t, "every partial request to be counted", func() bool {
		return counterValue(t, badTruncated)-truncated == total/2
	})
	if d := counterValue(t, rejectedConns) - rejected; d != 0 {
		t.Fatalf("%v connections refused", d)
	}
	// The server still serves.
	c := dial(t, s, "after")
	if av := c.apiVersions(3, "a", "1"); av.ErrorCode != 0 {
		t.Fatalf("ApiVersions after the churn: error %d", av.ErrorCode)
	}
}
