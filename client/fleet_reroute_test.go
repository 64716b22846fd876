package client

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// fleetTraceID is trace id number i: 16 bytes, never all zero, spread over the hash space.
func fleetTraceID(i int) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[:8], uint64(i)*0x9e3779b97f4a7c15+1)
	binary.BigEndian.PutUint64(b[8:], uint64(i))
	return b
}

// spansBody is a v1 trace body of one resource entry holding a span per name, span i of trace
// tids[i].
func spansBody(names []string, tids [][]byte) []byte {
	ss := &tracev1.ScopeSpans{}
	for i, n := range names {
		ss.Spans = append(ss.Spans, &tracev1.Span{Name: n, TraceId: tids[i], SpanId: binary.BigEndian.AppendUint64(nil, uint64(i+1))})
	}
	req := &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{{
			Key: "service.name", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "reroute"}},
		}}},
		ScopeSpans: []*tracev1.ScopeSpans{ss},
	}}}
	b, err := req.MarshalVT()
	if err != nil {
		panic(err)
	}
	return b
}

// oneSpan is the body of one span named name, of trace tid.
func oneSpan(name string, tid []byte) []byte { return spansBody([]string{name}, [][]byte{tid}) }

// ownerOf returns which of addrs owns trace id tid under the fleet's rendezvous hashing.
func ownerOf(addrs []string, tid []byte) string {
	s := slices.Sorted(slices.Values(addrs))
	hrw := newRendezvous(s)
	return s[hrw.Pick(fastpath.HashKey(tid))]
}

// traceOwnedBy returns the first trace number from *next on that addrs give to want, and moves
// *next past it.
func traceOwnedBy(t *testing.T, addrs []string, want string, next *int) []byte {
	for range 10000 {
		i := *next
		*next++
		if tid := fleetTraceID(i); ownerOf(addrs, tid) == want {
			return tid
		}
	}
	t.Fatalf("no trace id owned by %s", want)
	return nil
}

// admitSpans puts body in as one batch of items spans; the fleet has it when admitSpans
// returns.
func (f *feeder) admitSpans(body []byte, items int) {
	f.t.Helper()
	b, err := f.p.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: items})
	if err != nil {
		f.t.Fatalf("admit: %v", err)
	}
	f.mu.Lock()
	f.batches = append(f.batches, b)
	f.mu.Unlock()
}

// spanNames lists the names of every span u received, in arrival order.
func spanNames(u *upstream) []string {
	var out []string
	for _, g := range u.received() {
		var req coltracev1.ExportTraceServiceRequest
		if err := req.UnmarshalVT(g.body); err != nil {
			u.t.Errorf("undecodable request: %v", err)
			continue
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					out = append(out, sp.Name)
				}
			}
		}
	}
	return out
}

// rerouteConfig is a fleet of the given backends, one stream of window 1 per backend so that
// what waits at a backend stays in its queue, named uniquely for the run's metrics.
func rerouteConfig(t *testing.T) Config {
	c := fleetConfig(t, "fleet_"+t.Name()+"_"+strconv.FormatInt(destSeq.Add(1), 10))
	c.Streams, c.Window = 1, 1
	c.AckTimeout = 2 * waitFor
	c.EjectAfter = 0
	return c
}

// startTestFleet starts a fleet; the cleanup shuts it down unless the test did.
func startTestFleet(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	f, err := NewFleet(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	t.Cleanup(func() {
		if f.shut.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		f.Shutdown(ctx)
	})
	return f
}

// holdFirst makes u keep the answer to the request carrying span first until release is
// closed, and answer every other request at once.
func holdFirst(u *upstream, first string, release chan struct{}) {
	u.onStream = func(s *srvStream, g received) error {
		if tagOf(g.body) == first {
			go func() {
				<-release
				s.ack(g.id, otepv1.ResultCode_Success)
			}()
			return nil
		}
		s.ack(g.id, otepv1.ResultCode_Success)
		return nil
	}
}

// neverAnswer makes u read every request and answer none.
func neverAnswer(u *upstream) {
	u.onStream = func(*srvStream, received) error { return nil }
}

// A batch re-routed from a backend that left goes ahead of the newer batches of its key that
// reached the new owner first: at the new owner the key's spans arrive oldest first.
func TestFleetReroutedGoFirst(t *testing.T) {
	ua, ub := newUpstream(t), newUpstream(t)
	neverAnswer(ua)
	release := make(chan struct{})
	holdFirst(ub, "blocker", release)
	addrs := []string{ua.addr, ub.addr}
	path := filepath.Join(t.TempDir(), "gateways")
	writeEndpoints(t, path, addrs...)
	cfg := rerouteConfig(t)
	cfg.Resolver, cfg.EndpointsFile = ResolverFile, path
	f := startTestFleet(t, cfg)
	fd := newFeeder(t, f)

	next := 0
	bKey := traceOwnedBy(t, addrs, ub.addr, &next)
	key := traceOwnedBy(t, addrs, ua.addr, &next)
	// B: the blocker is sent and not answered; the filler waits behind it (window 1).
	fd.admitSpans(oneSpan("blocker", bKey), 1)
	ub.waitUntil("the blocker", func() bool { return len(ub.got) == 1 })
	fd.admitSpans(oneSpan("filler", bKey), 1)
	// A: the key's old span is sent and never answered.
	fd.admitSpans(oneSpan("old", key), 1)
	ua.waitUntil("the old span", func() bool { return len(ua.got) == 1 })

	// A leaves. Its handover waits for the answer (AckTimeout), so the key's newer span
	// reaches B first, and queues there.
	writeEndpoints(t, path, ub.addr)
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := f.Backends(); !slices.Equal(got, []string{ub.addr}) {
		t.Fatalf("backends %v, want only B", got)
	}
	fd.admitSpans(oneSpan("new", key), 1)
	rr0 := value(f.m.rerouted[rerouteLeft])
	dup0 := value(f.m.duplicates)

	// Shutdown ends A's wait: the old span is routed to B, which then drains.
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		done <- f.Shutdown(ctx)
	}()
	testkit.WaitFor(t, "the old span re-routed", func() bool { return value(f.m.rerouted[rerouteLeft]) == rr0+1 })
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if ok := fd.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v, want all", ok)
	}
	got := spanNames(ub)
	var keyOrder []string
	for _, n := range got {
		if n == "old" || n == "new" {
			keyOrder = append(keyOrder, n)
		}
	}
	if !slices.Equal(keyOrder, []string{"old", "new"}) {
		t.Errorf("the key's spans reached B as %v, want [old new] (all: %v)", keyOrder, got)
	}
	slices.Sort(got)
	if want := []string{"blocker", "filler", "new", "old"}; !slices.Equal(got, want) {
		t.Errorf("B received %v, want %v", got, want)
	}
	if got := spanNames(ua); !slices.Equal(got, []string{"old"}) {
		t.Errorf("A received %v, want [old]", got)
	}
	if v := value(f.m.duplicates) - dup0; v != 1 {
		t.Errorf("%d possible duplicates, want 1 (the old span, sent to A)", v)
	}
	ua.checkViolations()
	ub.checkViolations()
}

// A batch re-routed to a backend whose queue is full waits in the fleet's hold, not refused,
// and reaches the backend once it has room.
func TestFleetReroutedWaitsForRoom(t *testing.T) {
	ua, ub := newUpstream(t), newUpstream(t)
	neverAnswer(ua)
	release := make(chan struct{})
	holdFirst(ub, "b0", release)
	addrs := []string{ua.addr, ub.addr}
	path := filepath.Join(t.TempDir(), "gateways")
	writeEndpoints(t, path, addrs...)
	cfg := rerouteConfig(t)
	cfg.Resolver, cfg.EndpointsFile = ResolverFile, path
	next := 0
	var aKeys, bKeys [][]byte
	for range 3 {
		aKeys = append(aKeys, traceOwnedBy(t, addrs, ua.addr, &next))
		bKeys = append(bKeys, traceOwnedBy(t, addrs, ub.addr, &next))
	}
	// Every batch is one span of the same size: room for three and a half per backend, and in
	// the fleet's hold.
	size := len(oneSpan("a0", aKeys[0]))
	cfg.QueueBytes = int64(3*size + size/2)
	f := startTestFleet(t, cfg)
	fd := newFeeder(t, f)
	refused0 := value(f.m.refused[fleetRefusedFull])

	// B: b0 sent and held, b1 and b2 behind it: full.
	fd.admitSpans(oneSpan("b0", bKeys[0]), 1)
	ub.waitUntil("b0", func() bool { return len(ub.got) == 1 })
	fd.admitSpans(oneSpan("b1", bKeys[1]), 1)
	fd.admitSpans(oneSpan("b2", bKeys[2]), 1)
	// A: a0 sent and never answered, a1 and a2 behind it.
	fd.admitSpans(oneSpan("a0", aKeys[0]), 1)
	ua.waitUntil("a0", func() bool { return len(ua.got) == 1 })
	fd.admitSpans(oneSpan("a1", aKeys[1]), 1)
	fd.admitSpans(oneSpan("a2", aKeys[2]), 1)

	// A leaves: what it had not sent is handed back at once and meets B full.
	writeEndpoints(t, path, ub.addr)
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a batch held for room (or refused)", func() bool {
		return value(f.m.held) > 0 || value(f.m.refused[fleetRefusedFull]) != refused0
	})
	if v := value(f.m.refused[fleetRefusedFull]) - refused0; v != 0 {
		t.Fatalf("%d items refused, want 0", v)
	}
	held := value(f.m.held)
	close(release)
	testkit.WaitFor(t, "the hold to empty", func() bool { return value(f.m.held) == 0 })
	// a2 was queued at A; a1 too, unless A's sender had taken it to wait for the window.
	ub.waitUntil("a2 at B", func() bool { return slices.Contains(ub.tagsLocked(), "a2") })

	// Shutdown hands back a0, which A never answered.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := f.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if ok := fd.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v, want all", ok)
	}
	got := spanNames(ub)
	if len(got) != 6 || !slices.Equal(got[:3], []string{"b0", "b1", "b2"}) || got[5] != "a0" {
		t.Errorf("B received %v, want b0 b1 b2, then a1 and a2 in either order, then a0", got)
	}
	rest := slices.Sorted(slices.Values(got[3:5]))
	if !slices.Equal(rest, []string{"a1", "a2"}) {
		t.Errorf("B received %v after b2, want a1 and a2", got[3:5])
	}
	if v := value(f.m.refused[fleetRefusedFull]) - refused0; v != 0 {
		t.Errorf("%d items refused, want 0", v)
	}
	t.Logf("held at most %d bytes (a batch is %d)", held, size)
}

// A backend that stops answering for longer than eject-after is ejected and its batches go to
// the others, nothing acknowledged lost; once it answers again it is admitted again and new
// traces go to it in its share, each to the backend rendezvous hashing names.
func TestFleetReadmitsBackend(t *testing.T) {
	us := []*upstream{newUpstream(t), newUpstream(t), newUpstream(t)}
	addrs := []string{us[0].addr, us[1].addr, us[2].addr}
	cfg := fleetConfig(t, "fleet_readmit_"+strconv.FormatInt(destSeq.Add(1), 10))
	cfg.Resolver, cfg.Endpoints = ResolverStatic, addrs
	cfg.EjectAfter = 300 * time.Millisecond
	f := startTestFleet(t, cfg)
	fd := newFeeder(t, f)
	ej0, ra0 := value(f.m.ejections), value(f.m.readmissions)
	gone := us[2]
	gone.stop()

	// Before the ejection: 30 traces, three per batch; C's share waits for it.
	next := 0
	name := func(phase string, i int) string { return phase + strconv.Itoa(i) }
	batch := func(phase string, from, n int) {
		var names []string
		var tids [][]byte
		for i := from; i < from+n; i++ {
			names, tids = append(names, name(phase, i)), append(tids, fleetTraceID(next+i))
		}
		fd.admitSpans(spansBody(names, tids), n)
	}
	for i := 0; i < 30; i += 3 {
		batch("before", i, 3)
	}
	testkit.WaitFor(t, "C ejected", func() bool { return len(f.Backends()) == 2 })
	ok := fd.waitAll()
	if !allTrue(ok) {
		t.Fatalf("delivered %v, want all", ok)
	}
	seen := map[string]int{}
	for _, u := range us[:2] {
		for _, n := range spanNames(u) {
			seen[n]++
		}
	}
	for i := range 30 {
		if seen[name("before", i)] == 0 {
			t.Errorf("%s never arrived", name("before", i))
		}
	}
	if v := value(f.m.ejections) - ej0; v != 1 {
		t.Errorf("%d ejections, want 1", v)
	}

	// C answers again: admitted again, and new traces go to their owner among all three.
	gone.restart()
	testkit.WaitFor(t, "C admitted again", func() bool { return len(f.Backends()) == 3 })
	if v := value(f.m.readmissions) - ra0; v != 1 {
		t.Errorf("%d readmissions, want 1", v)
	}
	next = 1000
	for i := 0; i < 300; i += 30 {
		batch("after", i, 30)
	}
	if ok := fd.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v, want all", ok)
	}
	per := map[string]int{}
	for k, u := range us {
		got := map[string]bool{}
		for _, n := range spanNames(u) {
			got[n] = true
		}
		for i := range 300 {
			want := ownerOf(addrs, fleetTraceID(next+i)) == u.addr
			if got[name("after", i)] != want {
				t.Errorf("trace after%d at backend %d: %v, want %v", i, k, got[name("after", i)], want)
			}
			if want {
				per[u.addr]++
			}
		}
	}
	if n := per[gone.addr]; n < 60 || n > 140 {
		t.Errorf("the re-admitted backend owns %d of 300 new traces, want about a third", n)
	}
	t.Logf("new traces per backend %v; re-routed (ejected) %d", per, value(f.m.rerouted[rerouteEjected]))
}

// With no backend, the fleet holds batches up to queue-bytes and refuses the rest, counting
// their items; what it held is delivered, in order, once a backend appears.
func TestFleetHoldRefusesPastQueueBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateways")
	writeEndpoints(t, path)
	cfg := rerouteConfig(t)
	cfg.Resolver, cfg.EndpointsFile = ResolverFile, path
	cfg.ResolveInterval = time.Hour
	spans := func(tag string) []byte {
		var names []string
		var tids [][]byte
		for i := range 3 {
			names, tids = append(names, tag+strconv.Itoa(i)), append(tids, fleetTraceID(7))
		}
		return spansBody(names, tids)
	}
	size := len(spans("h0"))
	cfg.QueueBytes = int64(2*size + size/2)
	f := startTestFleet(t, cfg)
	fd := newFeeder(t, f)
	refused0 := value(f.m.refused[fleetRefusedFull])
	for i := range 5 {
		fd.admitSpans(spans("h"+strconv.Itoa(i)), 3)
	}
	if v := value(f.m.held); v != 2*size {
		t.Errorf("%d bytes held, want %d", v, 2*size)
	}
	if v := value(f.m.refused[fleetRefusedFull]) - refused0; v != 9 {
		t.Errorf("%d items refused, want 9 (three batches of three spans)", v)
	}
	for i := 2; i < 5; i++ {
		if fd.wait(i) {
			t.Errorf("batch %d delivered, want refused", i)
		}
	}
	u := newUpstream(t)
	writeEndpoints(t, path, u.addr)
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !fd.wait(i) {
			t.Errorf("held batch %d not delivered", i)
		}
	}
	if got, want := spanNames(u), []string{"h00", "h01", "h02", "h10", "h11", "h12"}; !slices.Equal(got, want) {
		t.Errorf("the backend received %v, want %v", got, want)
	}
	if v := value(f.m.held); v != 0 {
		t.Errorf("%d bytes still held", v)
	}
}

// A backend whose connection is up but that never answers is not admitted again at the next
// tick: it stays out for twice eject-after, then twice as long after each ejection with no
// answer in between, instead of flapping (each flap moves its keys and re-routes its requests).
func TestFleetHungBackendBacksOff(t *testing.T) {
	ua, ub := newUpstream(t), newUpstream(t)
	neverAnswer(ua)
	addrs := []string{ua.addr, ub.addr}
	cfg := fleetConfig(t, "fleet_backoff_"+strconv.FormatInt(destSeq.Add(1), 10))
	cfg.Resolver, cfg.Endpoints = ResolverStatic, addrs
	cfg.EjectAfter = 300 * time.Millisecond
	f := startTestFleet(t, cfg)
	fd := newFeeder(t, f)
	ej0, ra0 := value(f.m.ejections), value(f.m.readmissions)
	next := 0
	fd.admitSpans(oneSpan("x0", traceOwnedBy(t, addrs, ua.addr, &next)), 1)
	testkit.WaitFor(t, "the hung backend ejected", func() bool { return value(f.m.ejections)-ej0 == 1 })
	testkit.WaitFor(t, "the hung backend admitted again", func() bool { return value(f.m.readmissions)-ra0 == 1 })
	// The fleet's own times of both events: a test's clock, read after it saw each one, would
	// shorten the time out by however late a loaded machine let it look.
	if out := timeOut(f, ua.addr); out < 2*cfg.EjectAfter {
		t.Errorf("admitted again %v after its ejection, want at least twice eject-after (%v)", out, 2*cfg.EjectAfter)
	}
	// Still no answer: the second ejection keeps it out twice as long again.
	fd.admitSpans(oneSpan("x1", traceOwnedBy(t, addrs, ua.addr, &next)), 1)
	testkit.WaitFor(t, "the hung backend ejected again", func() bool { return value(f.m.ejections)-ej0 == 2 })
	testkit.WaitFor(t, "the hung backend admitted again, later", func() bool { return value(f.m.readmissions)-ra0 == 2 })
	if out := timeOut(f, ua.addr); out < 4*cfg.EjectAfter {
		t.Errorf("admitted again %v after its second ejection, want at least four times eject-after (%v)", out, 4*cfg.EjectAfter)
	}
}

// timeOut is how long the member at addr was out at its last ejection: from the ejection to
// its admission again, as the fleet recorded them.
func timeOut(f *Fleet, addr string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.mu.members {
		if m.addr == addr {
			return time.Duration(m.readmittedAt - m.ejectedAt)
		}
	}
	return 0
}

// seriesOf counts the series of the client's metrics that carry backend=addr.
func seriesOf(t *testing.T, addr string) int {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "otlpgate_client_") {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "backend" && l.GetValue() == addr {
					n++
				}
			}
		}
	}
	return n
}

// A backend that leaves the resolved set takes its metric series with it once it is handed
// over: with resolver=dns every address ever seen would otherwise stay in /metrics for good.
func TestFleetForgetsLeftBackendSeries(t *testing.T) {
	ua, ub := newUpstream(t), newUpstream(t)
	addrs := []string{ua.addr, ub.addr}
	path := filepath.Join(t.TempDir(), "gateways")
	writeEndpoints(t, path, addrs...)
	cfg := rerouteConfig(t)
	cfg.Resolver, cfg.EndpointsFile = ResolverFile, path
	f := startTestFleet(t, cfg)
	fd := newFeeder(t, f)
	next := 0
	fd.admitSpans(oneSpan("a", traceOwnedBy(t, addrs, ua.addr, &next)), 1)
	ua.waitUntil("a span", func() bool { return len(ua.got) == 1 })
	if seriesOf(t, ua.addr) == 0 {
		t.Fatal("no series for a backend that sent")
	}
	writeEndpoints(t, path, ub.addr)
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the left backend's series gone", func() bool { return seriesOf(t, ua.addr) == 0 })
	if seriesOf(t, ub.addr) == 0 {
		t.Error("the remaining backend lost its series")
	}
}

// A backend of a balanced destination makes a quarter of the streams and idle receivers a
// lone destination makes ahead of traffic: a fleet of many backends would otherwise hold 64
// idle goroutines and streams for each.
func TestFleetMembersPrefillLess(t *testing.T) {
	us := []*upstream{newUpstream(t), newUpstream(t), newUpstream(t)}
	cfg := fleetConfig(t, "fleet_prefill_"+strconv.FormatInt(destSeq.Add(1), 10))
	cfg.Resolver = ResolverStatic
	for _, u := range us {
		cfg.Endpoints = append(cfg.Endpoints, u.addr)
	}
	f := startTestFleet(t, cfg)
	lone := cfg.member(us[0].addr)
	lone.fleetMember = false
	lone.Name += "_lone"
	d := startDest(t, lone)
	stocked := func(d *Dest) (free, idle int) {
		d.streams.mu.Lock()
		defer d.streams.mu.Unlock()
		return len(d.streams.free), int(d.idleReceivers.Load())
	}
	if free, idle := stocked(d); free != 32*cfg.Streams || idle != 32*cfg.Streams {
		t.Fatalf("a lone destination stocked %d streams and %d idle receivers, want %d of each", free, idle, 32*cfg.Streams)
	}
	testkit.WaitFor(t, "three backends", func() bool { return len(f.Backends()) == 3 })
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr, m := range f.mu.members {
		if free, idle := stocked(m.d); free != 8*cfg.Streams || idle != 8*cfg.Streams {
			t.Errorf("backend %s stocked %d streams and %d idle receivers, want %d of each", addr, free, idle, 8*cfg.Streams)
		}
	}
}
