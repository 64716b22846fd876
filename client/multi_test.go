package client

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Three destinations share every batch: one whose endpoint is dead (its queue fills and it
// refuses the rest), an OTEP stream upstream and a v1 unary upstream. The live two receive every
// batch, byte for byte, while the dead one holds what fits in its queue.
func TestMultiDestination(t *testing.T) {
	const n = 10
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	body := traceBody("b0", 2, 300)
	deadCfg := streamConfig(t, dead, 2, 4)
	deadCfg.Name += "_dead"
	deadCfg.QueueBytes = int64(3*len(body) + len(body)/2)
	a := startDest(t, deadCfg)
	su, vu := newUpstream(t), newUpstream(t)
	sCfg := streamConfig(t, su.addr, 2, 4)
	sCfg.Name += "_stream"
	s := startDest(t, sCfg)
	vCfg := unaryConfig(t, vu.addr, ProtocolV1, 2)
	vCfg.Name += "_v1"
	v := startDest(t, vCfg)
	f := newFeeder(t, a, s, v)
	f.send(0, n, 2, 300)
	for _, u := range []*upstream{su, vu} {
		u.waitUntil("every batch", func() bool { return len(u.got) == n })
		c := count(u.tags())
		for _, tag := range tagList(0, n-1) {
			if c[tag] != 1 {
				t.Errorf("upstream %s: %s received %d times", u.addr, tag, c[tag])
			}
		}
		for _, g := range u.received() {
			if !bytes.Equal(g.body, f.body(g.tag)) {
				t.Errorf("upstream %s: %s differs", u.addr, g.tag)
			}
		}
	}
	if got, want := value(a.m.queueBytes), len(f.body("b0"))+len(f.body("b1"))+len(f.body("b2")); got != want {
		t.Errorf("dead destination holds %d bytes, want %d (three batches)", got, want)
	}
	if err := shutdown(t, a, 50*time.Millisecond); err == nil {
		t.Error("dead destination reported no loss")
	}
	for i, ok := range f.waitAll() {
		if ok {
			t.Errorf("batch %d reported delivered everywhere", i)
		}
	}
	if x, y := value(s.m.ackedRequests), value(v.m.ackedRequests); x != n || y != n {
		t.Errorf("acknowledged %d (stream) and %d (v1), want %d each", x, y, n)
	}
	lost := 0
	for r := range numDropReasons {
		lost += value(a.m.dropped[r])
	}
	if lost != 3 {
		t.Errorf("dead destination dropped %d, want the 3 it held", lost)
	}
}

// The per-destination metrics follow a plain run: sent, acknowledged, bytes, latency samples.
func TestMetrics(t *testing.T) {
	const n = 5
	u := newUpstream(t)
	d := startDest(t, streamConfig(t, u.addr, 1, 4))
	f := newFeeder(t, d)
	f.send(0, n, 3, 100)
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	if err := shutdown(t, d, waitFor); err != nil {
		t.Fatal(err)
	}
	bytes := 0
	for _, tag := range tagList(0, n-1) {
		bytes += len(f.body(tag))
	}
	checks := []struct {
		name      string
		got, want int
	}{
		{"sent", value(d.m.sentRequests), n},
		{"sent bytes", value(d.m.sentBytes), bytes},
		{"acknowledged", value(d.m.ackedRequests), n},
		{"acknowledged items", value(d.m.ackedItem), 3 * n},
		{"in flight", value(d.m.inFlight), 0},
		{"queue bytes", value(d.m.queueBytes), 0},
		{"streams opened", value(d.m.streamsOpened), 1},
		{"latency samples", histogramCount(t, d.m.ackLatency), n},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func histogramCount(t *testing.T, o prometheus.Observer) int {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return int(m.GetHistogram().GetSampleCount())
}
