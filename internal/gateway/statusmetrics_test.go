package gateway

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
	"github.com/otlpgate/otlpgate/server/admin"
	"github.com/otlpgate/otlpgate/spool"
)

// The status page samples internal/statusmetrics' registry, not the default one: every metric
// it reads must be registered there too (a package that defines one with promauto alone leaves
// the page showing nothing for it), with the same series as /metrics serves, and the page must
// show what went through.
func TestStatusReadsItsOwnRegistry(t *testing.T) {
	up, b1, b2 := startUpstream(t), startUpstream(t), startUpstream(t)
	cfg := testConfig()
	// A plain destination, a fleet, the spool and the OpenCensus socket: the families of each
	// exist, so that each is compared below.
	cfg.Destinations = []client.Config{destTo("main", up.addr)}
	cfg.Dests = []string{"name=fleet,protocol=v1,mode=unary,resolver=static,endpoints=" + b1.addr + "|" + b2.addr}
	cfg.Spool.Dir = t.TempDir()
	cfg.Spool.Sync = spool.SyncNone
	cfg.UDS.Listen = filepath.Join(t.TempDir(), "oc.sock")
	g := startGateway(t, cfg)
	for i := range 3 {
		if code := post(t, g, traceBody(t, 0, uint64(100+i), uint64(200+i))); code != 200 {
			t.Fatalf("post: %d", code)
		}
	}
	eventually(t, func() string { return "the upstreams did not get the spans" }, func() bool {
		return up.count(202) == 1 && b1.count(202)+b2.count(202) == 1
	})

	series := func(g prometheus.Gatherer) map[string]int {
		fams, err := g.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, f := range fams {
			n[f.GetName()] = len(f.GetMetric())
		}
		return n
	}
	all, own := series(prometheus.DefaultGatherer), series(statusmetrics.Registry)
	for _, name := range admin.StatusMetricNames() {
		if all[name] != own[name] {
			t.Errorf("%s: %d series in the default registry, %d in statusmetrics.Registry", name, all[name], own[name])
		}
	}
	// Not a comparison of two empty sets: what this gateway made must be there.
	for _, name := range []string{"otlpgate_http_received_items_total", "otlpgate_client_acknowledged_items_total",
		"otlpgate_client_queue_bytes", "otlpgate_client_ack_latency_seconds", "otlpgate_fastpath_queue_bytes",
		"otlpgate_intake_bytes_in_flight", "otlpgate_fleet_backends", "otlpgate_spool_bytes", "otlpgate_uds_received_bytes_total"} {
		if own[name] == 0 {
			t.Errorf("%s: not in statusmetrics.Registry", name)
		}
	}
	// And nothing else: the point of the registry is that a gather reads little.
	for name := range own {
		if !isStatusMetric(name) {
			t.Errorf("%s is in statusmetrics.Registry, but the status does not read it", name)
		}
	}

	// The page reads it: the destination's acknowledged spans.
	var st admin.Status
	eventually(t, func() string { return fmt.Sprintf("status: %+v", st.Destinations) }, func() bool {
		_, body := get(t, g, "/status.json")
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		acked := map[string]float64{}
		for _, d := range st.Destinations {
			acked[d.Name] += d.AckedItems
		}
		return len(acked) == 2 && acked["main"] == 6 && acked["fleet"] == 6
	})
}

func isStatusMetric(name string) bool {
	for _, n := range admin.StatusMetricNames() {
		if n == name {
			return true
		}
	}
	return false
}
