package reliability

import (
	"sync"
	"testing"
	"time"
)

// Four clients send as fast as they can to an upstream that takes 2 ms per request, far more
// than it can absorb: otlpgate stays within its queue bound, answers with backpressure
// (FailedRetryable), and once the load stops delivers everything it accepted.
func TestOverloadTenTimesFasterThanUpstream(t *testing.T) {
	seen := newSeen()
	up := startUpstream(t, seen, func(u *upstream) { u.delay = 2 * time.Millisecond })
	pc := pipelineConfig()
	pc.QueueMaxBytes = 256 << 10
	dc := destConfig("slow", up.addr())
	dc.QueueBytes = pc.QueueMaxBytes // as otlpgate derives it for a single destination
	g := startGate(t, pc, dc)

	const clients, each = 4, 1500
	var mu sync.Mutex
	acked := map[uint64]bool{}
	refused := 0
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, r := loadFrom(t, g.addr, 1+c*each, each, nil)
			mu.Lock()
			for id := range a {
				acked[id] = true
			}
			refused += r
			mu.Unlock()
		}()
	}
	wg.Wait()
	g.drained(t, 2*time.Minute)
	s := seen.snapshot()
	report(t, g, acked, s, checkDelivered(t, acked, s))
	t.Logf("answers with backpressure (FailedRetryable): %d", refused)
	if refused == 0 {
		t.Fatal("no backpressure under a load the upstream cannot absorb")
	}
	if len(acked) != clients*each {
		t.Fatalf("%d of %d acknowledged after the load stopped", len(acked), clients*each)
	}
}
