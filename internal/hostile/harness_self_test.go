package hostile

import (
	"io"
	"net/http"
	"strings"
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

// The admin listener, which the shipped manifests expose to the pod network, serves no profile
// and no command line (flags may hold -dest headers), and the profiling listener is off unless
// asked for.
func TestAdminServesNoProfiles(t *testing.T) {
	g := startGate(t, "-dest", "name=x,endpoint=127.0.0.1:1,protocol=v1,mode=unary,header=authorization:Bearer s3cret")
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap"} {
		resp, err := http.Get("http://" + g.Admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(b), "s3cret") {
			t.Errorf("%s on the admin listener: %s %.100q", path, resp.Status, b)
		}
	}
}
