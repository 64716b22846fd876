package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// statusRig is a registry with the client and intake metrics the status reads, driven by hand.
type statusRig struct {
	reg                                 *prometheus.Registry
	acked, ackedItems, dropped, retried *prometheus.CounterVec
	queue                               *prometheus.GaugeVec
	grpcItems, grpcReqs, intakeRefused  *prometheus.CounterVec
	latency                             *prometheus.HistogramVec
	spoolBytes, spoolMax, qBytes, qMax  prometheus.Gauge
}

func newStatusRig() *statusRig {
	r := &statusRig{reg: prometheus.NewRegistry()}
	dl := []string{"destination", "backend"}
	r.acked = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otlpgate_client_acknowledged_requests_total"}, dl)
	r.ackedItems = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otlpgate_client_acknowledged_items_total"}, dl)
	r.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otlpgate_client_dropped_items_total"}, append(dl, "reason"))
	r.retried = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otlpgate_client_retried_requests_total"}, append(dl, "reason"))
	r.queue = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "otlpgate_client_queue_bytes"}, dl)
	r.grpcItems = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otlpgate_grpc_received_items_total"}, []string{"protocol", "signal"})
	r.grpcReqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otlpgate_grpc_received_requests_total"}, []string{"protocol", "signal"})
	r.intakeRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otlpgate_intake_refused_total"}, []string{"intake", "resource"})
	r.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "otlpgate_client_ack_latency_seconds", Buckets: []float64{0.001, 0.01, 0.1, 1}}, dl)
	r.spoolBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "otlpgate_spool_bytes"})
	r.spoolMax = prometheus.NewGauge(prometheus.GaugeOpts{Name: "otlpgate_spool_max_bytes"})
	r.qBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "otlpgate_fastpath_queue_bytes"})
	r.qMax = prometheus.NewGauge(prometheus.GaugeOpts{Name: "otlpgate_fastpath_queue_max_bytes"})
	r.reg.MustRegister(r.acked, r.ackedItems, r.dropped, r.retried, r.queue, r.grpcItems, r.grpcReqs, r.intakeRefused, r.latency,
		r.spoolBytes, r.spoolMax, r.qBytes, r.qMax)
	return r
}

func findDest(t *testing.T, st Status, name string) DestinationStatus {
	t.Helper()
	for _, d := range st.Destinations {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no destination %q in %+v", name, st.Destinations)
	return DestinationStatus{}
}

// A destination that keeps acknowledging is ok; one that retries is degraded; one that holds
// data and acknowledges nothing for DownAfter is down, and its state records since when.
func TestStatusDestinationStates(t *testing.T) {
	r := newStatusRig()
	cfg := StatusConfig{Interval: time.Second, Window: time.Minute, DownAfter: 10 * time.Second}
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s := newSampler(cfg, r.reg, func() map[string]LastError {
		return map[string]LastError{"dead": {Message: "connection refused", At: t0.Add(3 * time.Second)}}
	})
	s.start = t0
	r.qMax.Set(1000)
	r.spoolMax.Set(1 << 30)
	r.spoolBytes.Set(1 << 20)
	for i := range 30 {
		now := t0.Add(time.Duration(i) * time.Second)
		// good acknowledges 10 requests of 100 items a second, each in 5 ms.
		r.acked.WithLabelValues("good", "").Add(10)
		r.ackedItems.WithLabelValues("good", "").Add(1000)
		for range 10 {
			r.latency.WithLabelValues("good", "").Observe(0.005)
		}
		r.queue.WithLabelValues("good", "").Set(0)
		// dead holds data and never acknowledges, and drops as its budget runs out.
		r.queue.WithLabelValues("dead", "").Set(4096)
		r.acked.WithLabelValues("dead", "").Add(0)
		if i >= 20 {
			r.dropped.WithLabelValues("dead", "", "retry_exhausted").Add(5)
		}
		// slow retries from second 25 on, and acknowledges.
		r.acked.WithLabelValues("slow", "").Add(1)
		if i >= 25 {
			r.retried.WithLabelValues("slow", "", "failed_retryable").Inc()
		}
		r.grpcItems.WithLabelValues("v1", "traces").Add(1000)
		r.grpcReqs.WithLabelValues("v1", "traces").Add(10)
		if i >= 28 {
			r.intakeRefused.WithLabelValues("grpc", "bytes").Add(3)
		}
		s.take(now)
		if i == 5 {
			if st := findDest(t, s.status(now), "dead"); st.State != "ok" {
				t.Fatalf("dead after 5 s: %s, want ok until -status.down-after", st.State)
			}
		}
	}
	now := t0.Add(29 * time.Second)
	st := s.status(now)
	good, dead, slow := findDest(t, st, "good"), findDest(t, st, "dead"), findDest(t, st, "slow")
	if good.State != "ok" || good.ItemsPerSec != 1000 || good.LastAck == nil || !good.LastAck.Equal(now) {
		t.Errorf("good: %+v", good)
	}
	if good.LatencyP50 < 0.001 || good.LatencyP50 > 0.01 || good.LatencyP99 > 0.01 {
		t.Errorf("good latency p50 %v p99 %v, want within the 1-10 ms bucket", good.LatencyP50, good.LatencyP99)
	}
	if dead.State != "down" || !dead.Since.Equal(t0.Add(10*time.Second)) || dead.LastAck != nil || dead.QueueBytes != 4096 ||
		dead.Dropped["retry_exhausted"] != 50 || dead.LastError != "connection refused" ||
		dead.LastErrorAt == nil || !dead.LastErrorAt.Equal(t0.Add(3*time.Second)) {
		t.Errorf("dead: %+v", dead)
	}
	if good.LastError != "" || good.LastErrorAt != nil {
		t.Errorf("good has a last error: %q at %v", good.LastError, good.LastErrorAt)
	}
	if slow.State != "degraded" || !slow.Since.Equal(t0.Add(25*time.Second)) || slow.Retried["failed_retryable"] != 5 {
		t.Errorf("slow: %+v", slow)
	}
	if len(st.Intakes) != 1 || st.Intakes[0].Name != "grpc" || st.Intakes[0].ItemsPerSec != 1000 || st.Intakes[0].RequestsPerSec != 10 ||
		st.Intakes[0].Refused["limiter bytes"] != 6 {
		t.Errorf("intakes: %+v", st.Intakes)
	}
	if st.Spool == nil || st.Spool.Bytes != 1<<20 || st.Queue.MaxBytes != 1000 {
		t.Errorf("spool %+v queue %+v", st.Spool, st.Queue)
	}
	if n := len(good.History); n != 29 || good.History[n-1] != 1000 {
		t.Errorf("history %v", good.History)
	}
	// A minute of history at one sample a second: the ring keeps Window/Interval+1 samples.
	for i := 30; i < 100; i++ {
		s.take(t0.Add(time.Duration(i) * time.Second))
	}
	if n := len(s.mu.ring); n != 61 {
		t.Errorf("ring holds %d samples, want 61", n)
	}
}

// The page renders what a person needs to read, and escapes what clients or upstreams control.
func TestStatusPageRenders(t *testing.T) {
	r := newStatusRig()
	s := &Server{log: nilLogger(), sampler: newSampler(DefaultStatusConfig(), r.reg, func() map[string]LastError {
		return map[string]LastError{"x<script>": {Message: "<b>boom</b>", At: time.Now()}}
	})}
	r.queue.WithLabelValues("x<script>", "").Set(1)
	r.dropped.WithLabelValues("x<script>", "", "rejected").Add(3)
	s.sampler.take(time.Now())
	rec := newRecorder()
	s.page(rec, mustRequest("/"))
	body := rec.body.String()
	for _, want := range []string{"x&lt;script&gt;", "&lt;b&gt;boom&lt;/b&gt; <span class=\"muted\">(", "rejected 3", `class="state ok"`, "/status.json", "setInterval(refresh,  2000 )"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q\n%s", want, body[max(0, len(body)-300):])
		}
	}
	if strings.Contains(body, "<b>boom</b>") || strings.Contains(body, "<script>\"") {
		t.Error("unescaped client data on the page")
	}
}

// The series key helpers read keys "metric|name=value|..." without building strings.
func TestSeriesKeyHelpers(t *testing.T) {
	const k = "otlpgate_client_sent_total|destination=a|signal=traces"
	for _, c := range []struct {
		kv   string
		want bool
	}{{"destination=a", true}, {"signal=traces", true}, {"signal=trace", false}, {"destination=", false},
		{"otlpgate_client_sent_total", false}, {"a|signal=traces", false}} {
		if got := containsLabel(k, c.kv); got != c.want {
			t.Errorf("containsLabel(%q) = %v, want %v", c.kv, got, c.want)
		}
	}
	for lbl, want := range map[string]string{"destination": "a", "signal": "traces", "sig": "", "otlpgate_client_sent_total": ""} {
		if got := labelOf(k, lbl); got != want {
			t.Errorf("labelOf(%q) = %q, want %q", lbl, got, want)
		}
	}
}

// With the configured destinations known, one a reload removed is shown as removed while it
// holds data and left out once it holds nothing; one never removed is shown as before.
func TestStatusRemovedDestination(t *testing.T) {
	r := newStatusRig()
	cfg := StatusConfig{Interval: time.Second, Window: time.Minute, DownAfter: 10 * time.Second}
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s := newSampler(cfg, r.reg, nil)
	s.start = t0
	current := []string{"kept", "gone"}
	s.current = func() []string { return current }
	names := func(st Status) string {
		var n []string
		for _, d := range st.Destinations {
			n = append(n, d.Name+":"+d.State)
		}
		return strings.Join(n, " ")
	}
	step := func(i int) Status {
		now := t0.Add(time.Duration(i) * time.Second)
		r.acked.WithLabelValues("kept", "").Inc()
		r.acked.WithLabelValues("gone", "").Inc()
		s.take(now)
		return s.status(now)
	}
	r.queue.WithLabelValues("gone", "").Set(512)
	if got := names(step(0)); got != "gone:ok kept:ok" {
		t.Fatalf("before the reload: %q", got)
	}
	current = []string{"kept"}
	if got := names(step(1)); got != "gone:removed kept:ok" {
		t.Fatalf("removed, still holding 512 bytes: %q", got)
	}
	r.queue.WithLabelValues("gone", "").Set(0)
	if got := names(step(2)); got != "kept:ok" {
		t.Fatalf("removed and drained: %q", got)
	}
}

// The kafka_consume intake shows its lag by partition and how many of its partitions stalled,
// 0 included, in /status.json and on the page; an intake with no partitions shows neither.
func TestStatusKafkaConsumeStalledPartitions(t *testing.T) {
	r := newStatusRig()
	records := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otlpgate_kafka_consume_records_total"}, []string{"signal"})
	items := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otlpgate_kafka_consume_items_total"}, []string{"signal"})
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "otlpgate_kafka_consume_lag"}, []string{"topic", "partition"})
	stalled := prometheus.NewGauge(prometheus.GaugeOpts{Name: "otlpgate_kafka_consume_stalled_partitions"})
	r.reg.MustRegister(records, items, lag, stalled)
	s := &Server{log: nilLogger(), sampler: newSampler(DefaultStatusConfig(), r.reg, nil)}
	r.grpcItems.WithLabelValues("v1", "traces").Add(10)
	records.WithLabelValues("traces").Add(4)
	items.WithLabelValues("traces").Add(40)
	lag.WithLabelValues("otlp_spans", "0").Set(3)
	lag.WithLabelValues("otlp_spans", "1").Set(0)

	type intake struct {
		Name    string             `json:"name"`
		Lag     map[string]float64 `json:"lag_by_partition"`
		Stalled *float64           `json:"stalled_partitions"`
	}
	check := func(wantStalled float64, wantHTML string) {
		t.Helper()
		s.sampler.take(time.Now())
		rec := newRecorder()
		s.statusJSON(rec, mustRequest("/status.json"))
		var doc struct {
			Intakes []intake `json:"intakes"`
		}
		if err := json.Unmarshal(rec.body.Bytes(), &doc); err != nil {
			t.Fatalf("/status.json: %v\n%s", err, rec.body.String())
		}
		got := map[string]intake{}
		for _, in := range doc.Intakes {
			got[in.Name] = in
		}
		if len(got) != 2 {
			t.Fatalf("intakes %+v, want grpc and kafka_consume", doc.Intakes)
		}
		if g := got["grpc"]; g.Lag != nil || g.Stalled != nil {
			t.Errorf("grpc shows a lag %v or stalled partitions %v", g.Lag, g.Stalled)
		}
		kc := got["kafka_consume"]
		if len(kc.Lag) != 2 || kc.Lag["otlp_spans/0"] != 3 || kc.Lag["otlp_spans/1"] != 0 {
			t.Errorf("kafka_consume lag %v, want otlp_spans/0: 3, otlp_spans/1: 0", kc.Lag)
		}
		if kc.Stalled == nil || *kc.Stalled != wantStalled {
			t.Errorf("kafka_consume stalled partitions %v, want %v", kc.Stalled, wantStalled)
		}
		rec = newRecorder()
		s.page(rec, mustRequest("/"))
		body := rec.body.String()
		if !strings.Contains(body, wantHTML) {
			t.Errorf("page lacks %q", wantHTML)
		}
		if strings.Contains(body, `data-intake-lag="grpc"`) {
			t.Error("the page shows a lag row for grpc")
		}
	}
	const row = `<tr class="lag" data-intake-lag="kafka_consume"><td colspan="7"><span class="muted">lag by partition (records past the committed offset):</span> otlp_spans/0 3; ` +
		`<span class="muted">stalled partitions (no progress for the stall timeout while records wait):</span> `
	check(0, row+"0</td></tr>")
	stalled.Set(1)
	check(1, row+`<span class="bad">1</span></td></tr>`)
}
