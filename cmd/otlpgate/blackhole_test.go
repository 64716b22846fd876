package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

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
	hole := testkit.StartGRPCSink(t, "")
	hole.SetSilent(true) // a server hung behind a live connection: reads every request, answers none
	g := bhGateway(t, bin, dir, hole.Addr(), ackTimeout)

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
		if short, streams = hole.Fewer(acked, 3), hole.Streams(); short == 0 {
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

	up := testkit.StartGRPCSink(t, "")
	g2 := bhGateway(t, bin, dir, up.Addr(), ackTimeout)
	dups, distinct := arrived(t, up, acked, l.sent)
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
