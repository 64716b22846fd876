package main

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// bhSilentUpstream is an OTEP stream upstream that accepts connections and streams, reads every
// request and answers none: a server hung behind a live connection.
type bhSilentUpstream struct {
	otepv1.UnimplementedStreamExporterServer
	addr string

	mu      sync.Mutex
	seen    map[uint64]int // span id -> times received
	streams int
}

func bhStartSilentUpstream(t *testing.T) *bhSilentUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &bhSilentUpstream{addr: ln.Addr().String(), seen: map[uint64]int{}}
	srv := grpc.NewServer()
	otepv1.RegisterStreamExporterServer(srv, u)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return u
}

func (u *bhSilentUpstream) ExportTraces(s grpc.BidiStreamingServer[otepv1.TraceExportRequest, otepv1.ExportResponse]) error {
	u.mu.Lock()
	u.streams++
	u.mu.Unlock()
	for {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		u.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					u.seen[binary.BigEndian.Uint64(sp.SpanId)]++
				}
			}
		}
		u.mu.Unlock()
	}
}

// receivedAtLeast returns how many of ids the upstream received fewer than n times, and the
// streams it was sent on so far.
func (u *bhSilentUpstream) receivedAtLeast(ids []uint64, n int) (short, streams int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range ids {
		if u.seen[id] < n {
			short++
		}
	}
	return short, u.streams
}

// bhGateway starts the binary with the spool in dir and one OTEP stream destination named up
// at upstream, whose ack timeout is ackTimeout; checkpoints are frequent, so that a record
// wrongly given up would be forgotten for good before the kill.
func bhGateway(t *testing.T, bin, dir, upstream string, ackTimeout time.Duration) *gateway {
	t.Helper()
	g := startGateway(t, bin, "-http.listen", "", "-spool.dir", dir, "-spool.checkpoint-interval", "20ms",
		"-batch.max-age", "10ms", "-shutdown.timeout", "5s",
		"-dest", "name=up,endpoint="+upstream+",protocol=otep,mode=stream,ack-timeout="+ackTimeout.String()+
			",retry-initial=20ms,retry-max=200ms")
	waitReady(t, g)
	return g
}

// bhDropped sums what the gateway counted as given up: by the spool (any reason) and by the
// destination (any reason).
func bhDropped(t *testing.T, g *gateway) (spool, client float64) {
	return scrape(t, g.admin, "otlpgate_spool_dropped_records_total"),
		scrape(t, g.admin, "otlpgate_client_dropped_requests_total", `destination="up"`)
}

// The real binary with a spool, its upstream accepting streams and answering nothing for far
// longer than the ack timeout (every request is read, timed out and sent again, twice at least),
// then killed with SIGKILL and started again against a working upstream: every acknowledged span
// arrives, duplicates are counted, and nothing was ever counted as dropped. An unanswered
// request never takes its records out of the spool.
func TestSpoolBlackHoledUpstreamThenKill9(t *testing.T) {
	const ackTimeout = 200 * time.Millisecond
	bin := buildBinary(t)
	dir := t.TempDir()
	hole := bhStartSilentUpstream(t)
	g := bhGateway(t, bin, dir, hole.addr, ackTimeout)

	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := otepv1.NewUnaryExporterClient(conn)
	l := newLoader(20, otlpgen.Shape{Spans: 5, Attrs: 2})
	for range 100 {
		req, ids := l.next()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.ExportTraces(ctx, req)
		cancel()
		if err != nil || resp.ResultCode != otepv1.ResultCode_Success {
			t.Fatalf("%v %v", resp, err)
		}
		l.ack(ids)
	}
	acked := l.ackedIDs()

	// Silent for several ack timeouts: every span is read three times at least (timed out and
	// sent again, twice), on more than one stream.
	start := time.Now()
	var short, streams int
	for deadline := start.Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if short, streams = hole.receivedAtLeast(acked, 3); short == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of %d acknowledged spans not sent twice again within 30s of silence (%d streams)", short, len(acked), streams)
			break
		}
	}
	spoolDropped, clientDropped := bhDropped(t, g)
	timeouts := scrape(t, g.admin, "otlpgate_client_ack_timeouts_total", `destination="up"`)
	t.Logf("silent upstream for %v (ack timeout %v): %v ack timeouts, %d streams; dropped: spool %v, destination %v",
		time.Since(start).Round(time.Millisecond), ackTimeout, timeouts, streams, spoolDropped, clientDropped)
	if spoolDropped != 0 || clientDropped != 0 {
		t.Errorf("dropped while the upstream was silent: %v spool records, %v destination requests", spoolDropped, clientDropped)
	}
	kill9(t, g)

	addr := freePort(t)
	up := startRecorder(t, addr)
	g2 := bhGateway(t, bin, dir, addr, ackTimeout)
	dups, distinct := up.arrived(t, acked, l.sent)
	replayed := scrape(t, g2.admin, "otlpgate_spool_replayed_records_total", `destination="up"`)
	spoolDropped, clientDropped = bhDropped(t, g2)
	t.Logf("after the restart: %d of %d acknowledged spans arrived, %d duplicates, %v records replayed; dropped: spool %v, destination %v",
		distinct, len(acked), dups, replayed, spoolDropped, clientDropped)
	if replayed == 0 {
		t.Error("nothing counted as replayed after the restart")
	}
	if spoolDropped != 0 || clientDropped != 0 {
		t.Errorf("dropped after the restart: %v spool records, %v destination requests", spoolDropped, clientDropped)
	}
	g2.terminate(t)
	if g2.exitErr != nil {
		t.Errorf("exit: %v\n%s", g2.exitErr, g2.stderr.String())
	}
}
