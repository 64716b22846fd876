package reliability

import (
	"sync"
	"testing"
	"time"
)

// Four clients send as fast as they can to an upstream that takes 2 ms per request, far more
// than it can absorb: otlpgate stays within its queue bound, answers with backpressure
// (FailedRetryable), and once the load stops delivers everything it accepted.
//
// The upstream takes nothing until the first backpressure answer: whether four clients
// outrun a 2 ms upstream depends on how busy the machine is (on a loaded one otlpgate's
// batches kept up and the queue never filled), while an upstream that lags from the start
// makes the queue fill on any machine.
func TestOverloadTenTimesFasterThanUpstream(t *testing.T) {
	seen := newSeen()
	hold := make(chan struct{})
	up := startUpstream(t, seen, func(u *upstream) { u.delay, u.hold = 2*time.Millisecond, hold })
	pc := pipelineConfig()
	pc.QueueMaxBytes = 256 << 10
	dc := destConfig("slow", up.addr())
	dc.QueueBytes = pc.QueueMaxBytes // as otlpgate derives it for a single destination
	g := startGate(t, pc, dc)

	refusedBefore := refusedAll.Load()
	released := make(chan struct{})
	go func() {
		defer close(released)
		defer close(hold)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			if refusedAll.Load() > refusedBefore {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { <-released }()

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
