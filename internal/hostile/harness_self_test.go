package hostile

import (
	"testing"
	"time"
)

// With no attack, the well-behaved client is served without a single refusal and the process
// stays small: the baseline every attack test is compared with.
func TestBaselineServed(t *testing.T) {
	g := startGate(t)
	w := watch(t, g, 50*time.Millisecond, 5*time.Second)
	w.waitServed(t, 10, 30*time.Second)
	w.end(t, time.Minute)
	g.alive(t)
	if len(w.refusals) != 0 {
		t.Errorf("refusals with no attack: %v", w.refusals)
	}
	if rss := g.PeakRSS(t); rss <= 0 || rss > 256<<20 {
		t.Errorf("peak RSS %d bytes at rest", rss)
	}
	if v := g.metric(t, "otlpgate_intake_bytes_in_flight"); v < 0 {
		t.Errorf("otlpgate_intake_bytes_in_flight not exported")
	}
}
