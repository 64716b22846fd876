package client

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// metricsBody is a v1 metrics request body with one gauge named tag.
func metricsBody(tag string) []byte {
	req := &colmetricsv1.ExportMetricsServiceRequest{ResourceMetrics: []*metricsv1.ResourceMetrics{{
		ScopeMetrics: []*metricsv1.ScopeMetrics{{Metrics: []*metricsv1.Metric{{
			Name: tag,
			Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{DataPoints: []*metricsv1.NumberDataPoint{{
				Value: &metricsv1.NumberDataPoint_AsInt{AsInt: 1},
			}}}},
		}}}},
	}}}
	b, err := req.MarshalVT()
	if err != nil {
		panic(err)
	}
	return b
}

// logsBody is a v1 logs request body with one record whose body is tag.
func logsBody(tag string) []byte {
	req := &collogsv1.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{
		ScopeLogs: []*logsv1.ScopeLogs{{LogRecords: []*logsv1.LogRecord{{
			Body: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: tag}},
		}}}},
	}}}
	b, err := req.MarshalVT()
	if err != nil {
		panic(err)
	}
	return b
}

// signalOf names the signal of a method, OTEP or v1.
func signalOf(method string) fastpath.Signal {
	switch {
	case strings.HasSuffix(method, "Traces") || strings.Contains(method, ".trace."):
		return fastpath.Traces
	case strings.HasSuffix(method, "Metrics") || strings.Contains(method, ".metrics."):
		return fastpath.Metrics
	}
	return fastpath.Logs
}

// signalTag reads the tag a body of sig was built with (traceBody, metricsBody, logsBody).
func signalTag(sig fastpath.Signal, body []byte) string {
	switch sig {
	case fastpath.Metrics:
		var req colmetricsv1.ExportMetricsServiceRequest
		if req.UnmarshalVT(body) != nil || len(req.ResourceMetrics) == 0 {
			return ""
		}
		return req.ResourceMetrics[0].ScopeMetrics[0].Metrics[0].Name
	case fastpath.Logs:
		var req collogsv1.ExportLogsServiceRequest
		if req.UnmarshalVT(body) != nil || len(req.ResourceLogs) == 0 {
			return ""
		}
		return req.ResourceLogs[0].ScopeLogs[0].LogRecords[0].Body.GetStringValue()
	}
	return tagOf(body)
}

// sendSignal admits one batch of sig with body, remembered under tag.
func (f *feeder) sendSignal(sig fastpath.Signal, tag string, body []byte) {
	f.t.Helper()
	b, err := f.p.Admit(pipeline.Request{Signal: sig, Body: body, Items: 1})
	if err != nil {
		f.t.Fatalf("admit %s: %v", tag, err)
	}
	f.mu.Lock()
	f.batches = append(f.batches, b)
	f.bodies[tag] = body
	f.mu.Unlock()
}

// mixedLoad sends five trace batches t0..t4 (ids 1..5), then three metrics batches m0..m2
// (ids 6..8) and three logs batches l0..l2 (ids 9..11), in that order.
func mixedLoad(f *feeder) {
	for i := range 5 {
		tag := fmt.Sprintf("t%d", i)
		f.sendSignal(fastpath.Traces, tag, traceBody(tag, 1, 50))
	}
	for i := range 3 {
		tag := fmt.Sprintf("m%d", i)
		f.sendSignal(fastpath.Metrics, tag, metricsBody(tag))
	}
	for i := range 3 {
		tag := fmt.Sprintf("l%d", i)
		f.sendSignal(fastpath.Logs, tag, logsBody(tag))
	}
}

// bySignal lists, per signal, "id:tag" of every request u received, in arrival order, and
// checks that each carried the exact bytes of its batch.
func bySignal(t *testing.T, f *feeder, u *upstream) [fastpath.Logs + 1][]string {
	t.Helper()
	var out [fastpath.Logs + 1][]string
	for _, g := range u.received() {
		sig := signalOf(g.method)
		tag := signalTag(sig, g.body)
		if !bytes.Equal(g.body, f.body(tag)) {
			t.Errorf("%s %q (id %d) differs from the batch sent", sig, tag, g.id)
		}
		out[sig] = append(out[sig], fmt.Sprintf("%d:%s", g.id, tag))
	}
	return out
}

// checkOthersDelivered waits for the metrics and logs batches of mixedLoad (indices 5..10)
// and requires each to be delivered, while the traces stay outstanding.
func checkOthersDelivered(t *testing.T, f *feeder, d *Dest) {
	t.Helper()
	for i := 5; i < 11; i++ {
		if !f.wait(i) {
			t.Fatalf("batch %d (metrics or logs) not delivered", i)
		}
	}
	// A batch is finished (Done) a moment before the destination stops counting it.
	for deadline := time.Now().Add(10 * time.Second); d.outstanding.Load() != 5 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := d.outstanding.Load(); n != 5 {
		t.Fatalf("%d requests outstanding, want the 5 trace batches", n)
	}
}

// In stream mode an upstream that stops answering traces holds up traces only: with a window
// of two, two traces wait for their answer and three wait in the queue, while every metrics and
// logs batch enqueued behind them is sent and acknowledged. Once the traces are answered they
// all arrive, in order, each once. Ids follow Enqueue order across signals.
func TestStreamStalledSignalDoesNotBlockOthers(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		u.window = 2
		type held struct {
			s  *srvStream
			id uint64
		}
		var mu sync.Mutex
		var stalled []held
		answerTraces := false
		u.onStream = func(s *srvStream, g received) error {
			if signalOf(g.method) == fastpath.Traces {
				mu.Lock()
				if !answerTraces {
					stalled = append(stalled, held{s, g.id})
					mu.Unlock()
					return nil
				}
				mu.Unlock()
			}
			s.ack(g.id, otepv1.ResultCode_Success)
			return nil
		}
		d := startDest(t, streamConfigOn(t, tr, u.addr, 1, 2))
		f := newFeeder(t, d)
		mixedLoad(f)

		checkOthersDelivered(t, f, d)
		u.waitUntil("the window of traces", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(stalled) == 2
		})
		got := bySignal(t, f, u)
		want := [3][]string{{"1:t0", "2:t1"}, {"6:m0", "7:m1", "8:m2"}, {"9:l0", "10:l1", "11:l2"}}
		for sig := range got {
			if !slices.Equal(got[sig], want[sig]) {
				t.Errorf("%s while traces stall: received %v, want %v", fastpath.Signal(sig), got[sig], want[sig])
			}
		}

		mu.Lock()
		answerTraces = true
		late := stalled
		stalled = nil
		mu.Unlock()
		for _, h := range late {
			h.s.ack(h.id, otepv1.ResultCode_Success)
		}
		for i := range 5 {
			if !f.wait(i) {
				t.Fatalf("trace batch %d not delivered", i)
			}
		}
		got = bySignal(t, f, u)
		if want := []string{"1:t0", "2:t1", "3:t2", "4:t3", "5:t4"}; !slices.Equal(got[fastpath.Traces], want) {
			t.Errorf("traces received %v, want %v", got[fastpath.Traces], want)
		}
		u.checkViolations()
	})
}

// In unary mode a traces call that the upstream does not answer occupies a traces worker only:
// with one worker per signal, metrics and logs calls go on while t0 waits and t1..t4 queue.
func TestUnaryStalledSignalDoesNotBlockOthers(t *testing.T) {
	u := newUpstream(t)
	release := make(chan struct{})
	var once sync.Once
	u.onUnary = func(g received) (otepv1.ResultCode, error) {
		if signalOf(g.method) == fastpath.Traces {
			<-release
		}
		return otepv1.ResultCode_Success, nil
	}
	d := startDest(t, unaryConfig(t, u.addr, ProtocolOTEP, 1))
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the destination's shutdown
	f := newFeeder(t, d)
	mixedLoad(f)

	checkOthersDelivered(t, f, d)
	// The traces worker may reach the upstream after the others finished: wait for t0's call.
	u.waitUntil("the stalled traces call", func() bool {
		for _, g := range u.got {
			if signalOf(g.method) == fastpath.Traces {
				return true
			}
		}
		return false
	})
	got := bySignal(t, f, u)
	want := [3][]string{{"1:t0"}, {"6:m0", "7:m1", "8:m2"}, {"9:l0", "10:l1", "11:l2"}}
	for sig := range got {
		if !slices.Equal(got[sig], want[sig]) {
			t.Errorf("%s while traces stall: received %v, want %v", fastpath.Signal(sig), got[sig], want[sig])
		}
	}
	once.Do(func() { close(release) })
	for i := range 5 {
		if !f.wait(i) {
			t.Fatalf("trace batch %d not delivered", i)
		}
	}
	got = bySignal(t, f, u)
	if want := []string{"1:t0", "2:t1", "3:t2", "4:t3", "5:t4"}; !slices.Equal(got[fastpath.Traces], want) {
		t.Errorf("traces received %v, want %v", got[fastpath.Traces], want)
	}
}
