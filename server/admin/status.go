package admin

import (
	"errors"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StatusConfig configures /status.json and the status page.
type StatusConfig struct {
	// Interval is how often the status is sampled from the registered metrics while someone
	// views it (-status.interval, default 2s).
	Interval time.Duration
	// Unviewed is how often it is sampled while no one does (-status.unviewed-interval,
	// default 10s; held between Interval and half of DownAfter, so that a destination's state
	// moves within DownAfter): a gather reads every series otlpgate has, and at low rates one
	// every 2s was a tenth of the process's CPU. The charts still get a point per Interval,
	// on a straight line between the two gathers around it.
	Unviewed time.Duration
	// Window is how much history the page's charts show (-status.window, default 10m).
	Window time.Duration
	// DownAfter marks a destination down when it holds data and has acknowledged nothing for
	// this long (-status.down-after, default 1m).
	DownAfter time.Duration
	// Intakes names the intakes that are on (grpc, http, kafka, uds); the others are not shown.
	// Empty shows every intake whose metrics exist.
	Intakes []string
	// Gatherer is what the status is sampled from; nil is prometheus.DefaultGatherer. otlpgate
	// gives it a registry of the metrics the status reads alone (internal/statusmetrics): a
	// gather costs per series gathered, and most series of a destination are not read here.
	Gatherer prometheus.Gatherer
}

// unviewed is how often the status is sampled while no one views it: Unviewed, held between
// Interval and half of DownAfter.
func (c StatusConfig) unviewed() time.Duration {
	return max(c.Interval, min(c.Unviewed, c.DownAfter/2))
}

// DefaultStatusConfig returns the defaults documented on StatusConfig.
func DefaultStatusConfig() StatusConfig {
	return StatusConfig{Interval: 2 * time.Second, Unviewed: 10 * time.Second, Window: 10 * time.Minute, DownAfter: time.Minute}
}

// Validate reports a configuration that cannot work.
func (c StatusConfig) Validate() error {
	switch {
	case c.Interval < 100*time.Millisecond:
		return errors.New("status: -status.interval must be at least 100ms")
	case c.Unviewed < 0:
		return errors.New("status: -status.unviewed-interval must not be negative")
	case c.Window < 2*c.Interval:
		return errors.New("status: -status.window must hold at least two intervals")
	case c.DownAfter < c.Interval:
		return errors.New("status: -status.down-after must be at least -status.interval")
	}
	return nil
}

// Status is the document /status.json serves. Rates are per second over the last minute (or
// since start when younger); History holds one value per Interval over Window, oldest first.
type Status struct {
	Time          time.Time           `json:"time"`
	UptimeSeconds float64             `json:"uptime_seconds"`
	Ready         bool                `json:"ready"`
	NotReady      string              `json:"not_ready,omitempty"`
	Interval      float64             `json:"interval_seconds"`
	Queue         QueueStatus         `json:"queue"`
	Intakes       []IntakeStatus      `json:"intakes"`
	Destinations  []DestinationStatus `json:"destinations"`
	Fleets        []FleetStatus       `json:"fleets"`
	Spool         *SpoolStatus        `json:"spool,omitempty"`
}

// QueueStatus is the pipeline's queue and the intake limiter.
type QueueStatus struct {
	Bytes           float64   `json:"bytes"`
	MaxBytes        float64   `json:"max_bytes"`
	IntakeBytes     float64   `json:"intake_bytes_in_flight"`
	RefusedPerSec   float64   `json:"refused_items_per_second"`
	AdmittedPerSec  float64   `json:"admitted_items_per_second"`
	AdmittedHistory []float64 `json:"admitted_history"`
}

// IntakeStatus is one intake's traffic.
type IntakeStatus struct {
	Name           string             `json:"name"`
	RequestsPerSec float64            `json:"requests_per_second"`
	ItemsPerSec    float64            `json:"items_per_second"`
	BytesPerSec    float64            `json:"bytes_per_second"`
	RefusedPerSec  float64            `json:"refused_per_second"`
	Refused        map[string]float64 `json:"refused_by_reason"`
	History        []float64          `json:"items_history"`
	// Lag is the Kafka consumer's records past the committed offset, by "topic/partition"
	// of the partitions it holds (otlpgate_kafka_consume_lag); only for kafka_consume.
	Lag map[string]float64 `json:"lag_by_partition,omitempty"`
	// StalledPartitions is how many of the Kafka consumer's partitions have not moved for
	// -kafka.consume.stall-timeout while records wait past them or their leader does not
	// answer (otlpgate_kafka_consume_stalled_partitions), 0 included; only for kafka_consume.
	StalledPartitions *float64 `json:"stalled_partitions,omitempty"`
}

// DestinationStatus is one destination's health and traffic.
type DestinationStatus struct {
	Name string `json:"name"`
	// State is ok, degraded (retrying, throttled or dropping within the last DownAfter) or down
	// (holding data with nothing acknowledged for DownAfter, or the upstream does not serve a
	// signal it is sent: otlpgate_client_unserved_signals); removed while a destination a reload
	// took out still drains (SetDestinations).
	State       string     `json:"state"`
	Since       time.Time  `json:"state_since"`
	LastAck     *time.Time `json:"last_ack,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	QueueBytes  float64    `json:"queue_bytes"`
	InFlight    float64    `json:"in_flight_requests"`
	ItemsPerSec float64    `json:"acknowledged_items_per_second"`
	// AckedItems and AckedRequests are what it delivered since the start (a file: wrote).
	AckedItems      float64            `json:"acknowledged_items"`
	AckedRequests   float64            `json:"acknowledged_requests"`
	LatencyP50      float64            `json:"ack_latency_p50_seconds"`
	LatencyP99      float64            `json:"ack_latency_p99_seconds"`
	Dropped         map[string]float64 `json:"dropped_items_by_reason"`
	Retried         map[string]float64 `json:"retried_requests_by_reason"`
	Throttles       float64            `json:"throttles"`
	History         []float64          `json:"items_history"`
	DroppedPerSec   float64            `json:"dropped_items_per_second"`
	RetriedPerSec   float64            `json:"retried_requests_per_second"`
	ThrottlesPerSec float64            `json:"throttles_per_second"`
}

// FleetStatus is a balanced destination's membership.
type FleetStatus struct {
	Name       string  `json:"name"`
	Backends   float64 `json:"backends"`
	Ejections  float64 `json:"ejections"`
	Readmitted float64 `json:"readmissions"`
}

// SpoolStatus is the spool's fill.
type SpoolStatus struct {
	Bytes          float64 `json:"bytes"`
	MaxBytes       float64 `json:"max_bytes"`
	Segments       float64 `json:"segments"`
	OldestAgeSecs  float64 `json:"oldest_unfinished_age_seconds"`
	DroppedRecords float64 `json:"dropped_records"`
}

type bucket struct {
	le    float64
	count float64
}

// sampler gathers the registry every Interval and keeps the samples of the last Window. The
// status is derived from metrics only, so the admin package needs no other otlpgate package,
// and what the page shows is what Prometheus would show.
type sampler struct {
	cfg     StatusConfig
	g       prometheus.Gatherer
	start   time.Time
	lastErr func() map[string]LastError
	current func() []string // nil: every destination with a series is current
	// viewed is set by a view of the status: the sampler goes back to every interval.
	viewed atomic.Bool
	// wakes counts the sampler goroutine's wake-ups (runSampler), for the tests.
	wakes atomic.Int64

	mu struct {
		sync.Mutex
		ring  []sample
		dests map[string]*destTrack
		// gathered is when the last sample was gathered (take); the samples after it, if
		// any, repeat it.
		gathered time.Time
	}

	// build is take's: the set of the last sample, reused while the series stay the same, and
	// the scratch space series keys are built in.
	build struct {
		sync.Mutex
		set *seriesSet
		buf []byte
	}
}

// destTrack is what the sampler remembers of a destination across samples.
type destTrack struct {
	state   string
	since   time.Time
	lastAck time.Time // zero: never
	acked   float64
	trouble time.Time // last sample where retries, throttles or drops moved
}

func newSampler(cfg StatusConfig, g prometheus.Gatherer, lastErr func() map[string]LastError) *sampler {
	s := &sampler{cfg: cfg, g: g, start: time.Now(), lastErr: lastErr}
	s.mu.dests = map[string]*destTrack{}
	return s
}

// take gathers one sample and updates the destinations' states. It reports whether any value
// differs from the sample before (or the series do). Safe for concurrent use.
func (s *sampler) take(now time.Time) (changed bool) {
	fams, _ := s.g.Gather()
	s.build.Lock()
	set := s.build.set
	same := false
	if set != nil {
		same, s.build.buf = set.sameSeries(fams, s.build.buf)
	}
	if !same {
		set, s.build.buf = buildSeriesSet(fams, set, s.build.buf)
		s.build.set = set
	}
	sm := sample{at: now, set: set, vals: make([]float64, len(set.keys))}
	set.fill(fams, sm.vals)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.build.Unlock() // thinSample writes the sets' thin fields
	s.fillLocked(now, &sm)
	changed = true
	if n := len(s.mu.ring); n > 0 && s.mu.ring[n-1].set == set && slices.Equal(s.mu.ring[n-1].vals, sm.vals) {
		changed = false
	}
	s.mu.gathered = now
	s.appendLocked(sm)
	return changed
}

// fillLocked adds a sample at every interval after the last one that now is at least half an
// interval past: the intervals the sampler slept through (runSampler), so that the charts keep
// one point per interval and the destinations' states their clock. Between two gathers of the
// same series (next, the one being added) each value is on the straight line from the last
// gather's to next's, so that a counter's rate is spread over the gap instead of shown as a
// spike after flat points; otherwise (an idle sampler's repeats, or series that changed) the
// last sample is repeated. Only the last Window is filled: the ring holds no more. Called with
// s.mu and s.build held.
func (s *sampler) fillLocked(now time.Time, next *sample) {
	n := len(s.mu.ring)
	if n == 0 {
		return
	}
	last := s.mu.ring[n-1]
	step := s.cfg.Interval
	at := last.at.Add(step)
	if from := now.Add(-s.cfg.Window); at.Before(from) {
		at = at.Add(from.Sub(at).Truncate(step))
	}
	line := next != nil && next.set == last.set && len(next.vals) == len(last.vals) && now.After(last.at)
	for ; now.Sub(at) >= step/2; at = at.Add(step) {
		if !line {
			// The values are shared, never written: a sample is thinned into new ones.
			s.appendLocked(sample{at: at, set: last.set, vals: last.vals})
			continue
		}
		f := float64(at.Sub(last.at)) / float64(now.Sub(last.at))
		vals := make([]float64, len(last.vals))
		for i, v := range last.vals {
			vals[i] = v + (next.vals[i]-v)*f
		}
		s.appendLocked(sample{at: at, set: last.set, vals: vals})
	}
}

// stale reports whether the values were last gathered before now-Interval (the samples since,
// if any, repeat them). Safe for concurrent use.
func (s *sampler) stale(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(s.mu.gathered) >= s.cfg.Interval
}

// appendLocked adds sm to the ring, drops what the window no longer holds, thins what only the
// charts read, and moves the destinations' states. Called with s.mu and s.build held.
func (s *sampler) appendLocked(sm sample) {
	now := sm.at
	s.mu.ring = append(s.mu.ring, sm)
	keep := int(s.cfg.Window/s.cfg.Interval) + 1
	if len(s.mu.ring) > keep {
		s.mu.ring = slices.Delete(s.mu.ring, 0, len(s.mu.ring)-keep)
	}
	// Rates and latencies read the samples from the newest back to the newest one at least a
	// minute old (rate, status); the older ones serve the charts alone, and keep only their
	// series. Thinning goes from the oldest up, so it stops at the first sample already thin.
	ring := s.mu.ring
	for i := len(ring) - 2; i >= 0; i-- {
		if now.Sub(ring[i].at) >= time.Minute {
			for j := i - 1; j >= 0 && !ring[j].set.thinned; j-- {
				ring[j] = thinSample(ring[j])
			}
			break
		}
	}
	s.trackLocked(sm)
}

// statusMetrics are the metrics the status reads; the others are skipped while gathering.
var statusMetrics = map[string]bool{}

// StatusMetricNames returns the names of the metrics the status reads, sorted: what a
// StatusConfig.Gatherer must hold of otlpgate's metrics for the status to be whole.
func StatusMetricNames() []string {
	names := make([]string, 0, len(statusMetrics))
	for n := range statusMetrics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func init() {
	for _, n := range []string{
		"otlpgate_grpc_received_requests_total", "otlpgate_grpc_received_items_total", "otlpgate_grpc_received_bytes_total", "otlpgate_grpc_refused_requests_total",
		"otlpgate_http_received_requests_total", "otlpgate_http_received_items_total", "otlpgate_http_received_bytes_total", "otlpgate_http_refused_requests_total", "otlpgate_http_rejected_requests_total",
		"otlpgate_kafka_requests_total", "otlpgate_kafka_exported_points_total", "otlpgate_kafka_export_errors_total",
		"otlpgate_uds_messages_total", "otlpgate_uds_items_total", "otlpgate_uds_received_bytes_total",
		"otlpgate_kafka_consume_records_total", "otlpgate_kafka_consume_items_total", "otlpgate_kafka_consume_bytes_total",
		"otlpgate_kafka_consume_skipped_records_total", "otlpgate_kafka_consume_lag", "otlpgate_kafka_consume_stalled_partitions",
		"otlpgate_intake_refused_total", "otlpgate_intake_bytes_in_flight",
		"otlpgate_fastpath_queue_bytes", "otlpgate_fastpath_queue_max_bytes", "otlpgate_fastpath_admitted_items_total", "otlpgate_fastpath_refused_items_total",
		"otlpgate_client_acknowledged_items_total", "otlpgate_client_acknowledged_requests_total", "otlpgate_client_sent_requests_total",
		"otlpgate_client_dropped_items_total", "otlpgate_client_retried_requests_total", "otlpgate_client_throttles_total",
		"otlpgate_client_queue_bytes", "otlpgate_client_in_flight_requests", "otlpgate_client_ack_latency_seconds", "otlpgate_client_unserved_signals",
		"otlpgate_fleet_backends", "otlpgate_fleet_ejections_total", "otlpgate_fleet_readmissions_total",
		"otlpgate_spool_bytes", "otlpgate_spool_max_bytes", "otlpgate_spool_segments", "otlpgate_spool_oldest_unfinished_age_seconds", "otlpgate_spool_dropped_records_total",
	} {
		statusMetrics[n] = true
	}
}

// trackLocked moves each destination's state with the newest sample.
func (s *sampler) trackLocked(sm sample) {
	prev := sm
	if n := len(s.mu.ring); n >= 2 {
		prev = s.mu.ring[n-2]
	}
	for _, d := range sm.destinations() {
		dw := "destination=" + d
		t := s.mu.dests[d]
		if t == nil {
			t = &destTrack{state: "ok", since: sm.at}
			s.mu.dests[d] = t
		}
		acked := sm.sum("otlpgate_client_acknowledged_requests_total", dw)
		if acked > t.acked {
			t.lastAck = sm.at
		}
		t.acked = acked
		moved := func(metric string) bool { return sm.sum(metric, dw) > prev.sum(metric, dw) }
		if moved("otlpgate_client_retried_requests_total") || moved("otlpgate_client_throttles_total") ||
			moved("otlpgate_client_dropped_items_total") {
			t.trouble = sm.at
		}
		holding := sm.sum("otlpgate_client_queue_bytes", dw) > 0 || sm.sum("otlpgate_client_in_flight_requests", dw) > 0
		quietSince := t.lastAck
		if quietSince.IsZero() {
			quietSince = s.start
		}
		state := "ok"
		switch {
		case sm.sum("otlpgate_client_unserved_signals", dw) > 0:
			// The upstream does not serve what it is sent: down until fixed, however recent
			// the last acknowledgement of another signal.
			state = "down"
		case holding && sm.at.Sub(quietSince) >= s.cfg.DownAfter:
			state = "down"
		case !t.trouble.IsZero() && sm.at.Sub(t.trouble) < s.cfg.DownAfter:
			state = "degraded"
		}
		if state != t.state {
			t.state, t.since = state, sm.at
		}
	}
}

// rate is the per-second increase of f between the sample a minute (or as far as the ring goes)
// before the newest, and the newest.
func rate(ring []sample, f func(*sample) float64) float64 {
	if len(ring) < 2 {
		return 0
	}
	last := &ring[len(ring)-1]
	i := len(ring) - 2
	for i > 0 && last.at.Sub(ring[i].at) < time.Minute {
		i--
	}
	dt := last.at.Sub(ring[i].at).Seconds()
	if dt <= 0 {
		return 0
	}
	return max(0, (f(last)-f(&ring[i]))/dt)
}

// history is the per-second increase of f between consecutive samples.
func history(ring []sample, f func(*sample) float64) []float64 {
	out := make([]float64, 0, len(ring))
	for i := 1; i < len(ring); i++ {
		dt := ring[i].at.Sub(ring[i-1].at).Seconds()
		if dt <= 0 {
			continue
		}
		out = append(out, round(max(0, (f(&ring[i])-f(&ring[i-1]))/dt)))
	}
	return out
}

func round(v float64) float64 { return math.Round(v*100) / 100 }

// quantile estimates the q quantile of the acknowledgements of the last minute from the
// cumulative buckets of two samples, interpolating within a bucket.
func quantile(q float64, from, to []bucket) float64 {
	if len(to) == 0 {
		return 0
	}
	d := make([]float64, len(to))
	for i := range to {
		d[i] = to[i].count
		if i < len(from) {
			d[i] -= from[i].count
		}
	}
	total := d[len(d)-1]
	if total <= 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i, c := range d {
		if c >= rank {
			if c == below {
				return to[i].le
			}
			return lower + (to[i].le-lower)*(rank-below)/(c-below)
		}
		lower, below = to[i].le, c
	}
	return to[len(to)-1].le
}

// status builds the document from the samples. Safe for concurrent use.
func (s *sampler) status(now time.Time) Status {
	s.mu.Lock()
	ring := slices.Clone(s.mu.ring)
	tracks := map[string]destTrack{}
	for k, v := range s.mu.dests {
		tracks[k] = *v
	}
	s.mu.Unlock()
	st := Status{Time: now, UptimeSeconds: round(now.Sub(s.start).Seconds()), Interval: s.cfg.Interval.Seconds(),
		Intakes: []IntakeStatus{}, Destinations: []DestinationStatus{}, Fleets: []FleetStatus{}}
	if len(ring) == 0 {
		return st
	}
	last := &ring[len(ring)-1]
	st.Queue = QueueStatus{
		Bytes: last.sum("otlpgate_fastpath_queue_bytes"), MaxBytes: last.sum("otlpgate_fastpath_queue_max_bytes"),
		IntakeBytes:     last.sum("otlpgate_intake_bytes_in_flight"),
		AdmittedPerSec:  round(rate(ring, func(x *sample) float64 { return x.sum("otlpgate_fastpath_admitted_items_total") })),
		RefusedPerSec:   round(rate(ring, func(x *sample) float64 { return x.sum("otlpgate_fastpath_refused_items_total") })),
		AdmittedHistory: history(ring, func(x *sample) float64 { return x.sum("otlpgate_fastpath_admitted_items_total") }),
	}
	for _, in := range intakeDefs {
		if !last.has(in.items) && !last.has(in.requests) {
			continue
		}
		if len(s.cfg.Intakes) > 0 && !slices.Contains(s.cfg.Intakes, in.name) {
			continue
		}
		is := IntakeStatus{Name: in.name,
			RequestsPerSec: round(rate(ring, func(x *sample) float64 { return x.sum(in.requests, in.requestsWant...) })),
			ItemsPerSec:    round(rate(ring, func(x *sample) float64 { return x.sum(in.items, in.itemsWant...) })),
			BytesPerSec:    round(rate(ring, func(x *sample) float64 { return x.sum(in.bytes) })),
			History:        history(ring, func(x *sample) float64 { return x.sum(in.items, in.itemsWant...) }),
			Refused:        map[string]float64{},
		}
		refused := func(x *sample) float64 {
			n := x.sum("otlpgate_intake_refused_total", "intake="+in.name)
			for _, m := range in.refused {
				n += x.sum(m)
			}
			return n
		}
		is.RefusedPerSec = round(rate(ring, refused))
		for _, m := range in.refused {
			for r, v := range last.byLabel(m, "reason") {
				is.Refused[r] += v
			}
		}
		for r, v := range last.byLabel("otlpgate_intake_refused_total", "resource", "intake="+in.name) {
			is.Refused["limiter "+r] += v
		}
		if in.lag != "" {
			for topic := range last.byLabel(in.lag, "topic") {
				for p, v := range last.byLabel(in.lag, "partition", "topic="+topic) {
					if is.Lag == nil {
						is.Lag = map[string]float64{}
					}
					is.Lag[topic+"/"+p] = v
				}
			}
		}
		if in.stalled != "" && last.has(in.stalled) {
			n := last.sum(in.stalled)
			is.StalledPartitions = &n
		}
		st.Intakes = append(st.Intakes, is)
	}
	var errs map[string]LastError
	if s.lastErr != nil {
		errs = s.lastErr()
	}
	minuteAgo := &ring[0]
	for i := len(ring) - 2; i >= 0; i-- {
		minuteAgo = &ring[i]
		if last.at.Sub(ring[i].at) >= time.Minute {
			break
		}
	}
	var current map[string]bool
	if s.current != nil {
		current = map[string]bool{}
		for _, d := range s.current() {
			current[d] = true
		}
	}
	for _, d := range last.destinations() {
		dw := "destination=" + d
		t := tracks[d]
		removed := current != nil && !current[d]
		if removed && last.sum("otlpgate_client_queue_bytes", dw) == 0 && last.sum("otlpgate_client_in_flight_requests", dw) == 0 {
			continue // removed by a reload and drained: its counters stay in /metrics, not here
		}
		if removed {
			t.state = "removed"
		}
		ds := DestinationStatus{Name: d, State: t.state, Since: t.since, LastError: errs[d].Message,
			QueueBytes:    last.sum("otlpgate_client_queue_bytes", dw),
			InFlight:      last.sum("otlpgate_client_in_flight_requests", dw),
			ItemsPerSec:   round(rate(ring, func(x *sample) float64 { return x.sum("otlpgate_client_acknowledged_items_total", dw) })),
			AckedItems:    last.sum("otlpgate_client_acknowledged_items_total", dw),
			AckedRequests: last.sum("otlpgate_client_acknowledged_requests_total", dw),
			Dropped:       last.byLabel("otlpgate_client_dropped_items_total", "reason", dw),
			Retried:       last.byLabel("otlpgate_client_retried_requests_total", "reason", dw),
			Throttles:     last.sum("otlpgate_client_throttles_total", dw),
			History:       history(ring, func(x *sample) float64 { return x.sum("otlpgate_client_acknowledged_items_total", dw) }),
			LatencyP50:    round(quantile(0.5, minuteAgo.latency(d), last.latency(d))*1e4) / 1e4,
			LatencyP99:    round(quantile(0.99, minuteAgo.latency(d), last.latency(d))*1e4) / 1e4,
			DroppedPerSec: round(rate(ring, func(x *sample) float64 {
				return x.sum("otlpgate_client_dropped_items_total", dw)
			})),
			RetriedPerSec:   round(rate(ring, func(x *sample) float64 { return x.sum("otlpgate_client_retried_requests_total", dw) })),
			ThrottlesPerSec: round(rate(ring, func(x *sample) float64 { return x.sum("otlpgate_client_throttles_total", dw) })),
		}
		if !t.lastAck.IsZero() {
			la := t.lastAck
			ds.LastAck = &la
		}
		if e := errs[d]; e.Message != "" && !e.At.IsZero() {
			at := e.At
			ds.LastErrorAt = &at
		}
		st.Destinations = append(st.Destinations, ds)
	}
	for d, n := range last.byLabel("otlpgate_fleet_backends", "destination") {
		dw := "destination=" + d
		st.Fleets = append(st.Fleets, FleetStatus{Name: d, Backends: n,
			Ejections:  last.sum("otlpgate_fleet_ejections_total", dw),
			Readmitted: last.sum("otlpgate_fleet_readmissions_total", dw)})
	}
	sort.Slice(st.Fleets, func(i, j int) bool { return st.Fleets[i].Name < st.Fleets[j].Name })
	if max := last.sum("otlpgate_spool_max_bytes"); max > 0 {
		st.Spool = &SpoolStatus{Bytes: last.sum("otlpgate_spool_bytes"), MaxBytes: max,
			Segments:       last.sum("otlpgate_spool_segments"),
			OldestAgeSecs:  last.sum("otlpgate_spool_oldest_unfinished_age_seconds"),
			DroppedRecords: last.sum("otlpgate_spool_dropped_records_total")}
	}
	return st
}

// intakeDef says which metrics describe an intake.
type intakeDef struct {
	name                    string
	requests, items, bytes  string
	requestsWant, itemsWant []string
	refused                 []string
	lag                     string // a gauge of records not yet committed, by topic and partition
	stalled                 string // a gauge of partitions that stalled
}

var intakeDefs = []intakeDef{
	{name: "grpc", requests: "otlpgate_grpc_received_requests_total", items: "otlpgate_grpc_received_items_total",
		bytes: "otlpgate_grpc_received_bytes_total", refused: []string{"otlpgate_grpc_refused_requests_total"}},
	{name: "http", requests: "otlpgate_http_received_requests_total", items: "otlpgate_http_received_items_total",
		bytes: "otlpgate_http_received_bytes_total", refused: []string{"otlpgate_http_refused_requests_total", "otlpgate_http_rejected_requests_total"}},
	{name: "kafka", requests: "otlpgate_kafka_requests_total", requestsWant: []string{"api=push_telemetry"},
		items: "otlpgate_kafka_exported_points_total", refused: []string{"otlpgate_kafka_export_errors_total"}},
	{name: "uds", requests: "otlpgate_uds_messages_total", items: "otlpgate_uds_items_total", itemsWant: []string{"outcome=accepted"},
		bytes: "otlpgate_uds_received_bytes_total"},
	{name: "kafka_consume", requests: "otlpgate_kafka_consume_records_total", items: "otlpgate_kafka_consume_items_total",
		bytes: "otlpgate_kafka_consume_bytes_total", refused: []string{"otlpgate_kafka_consume_skipped_records_total"}, lag: "otlpgate_kafka_consume_lag",
		stalled: "otlpgate_kafka_consume_stalled_partitions"},
}
