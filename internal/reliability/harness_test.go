package reliability

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/gateway"
	"github.com/otlpgate/otlpgate/internal/testkit"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// gnet's worker pool (ants), linked in by the gateway's UDS intake, starts its cleaner
// goroutines when the package initialises: they belong to the dependency, not to a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// upstream is an OTEP stream server that records the span ids it accepted. It is not
// testkit.GRPCSink: it injects faults (a share of FailedRetryable answers, delays, throttling,
// silence), and what it saw is kept in a seenSet that outlives its restarts.
type upstream struct {
	otepv1.UnimplementedStreamExporterServer
	gs   *grpc.Server
	ln   net.Listener
	done chan struct{}
	seen *seenSet

	failPct       int           // answer FailedRetryable to this share of requests
	delay         time.Duration // take this long over each request: a slow upstream
	hold          chan struct{} // take no request until this is closed (nil: none)
	throttleEvery int64         // end the stream with UNAVAILABLE + RetryInfo every Nth request
	throttleFor   time.Duration // the RetryInfo delay
	silent        atomic.Bool   // read every request and answer none: a server that hangs
	unanswered    atomic.Int64  // requests read while silent
	requests      atomic.Int64
	mu            sync.Mutex
	rnd           *rand.Rand
}

// seenSet counts deliveries per span id; it outlives an upstream's restarts.
type seenSet struct {
	mu sync.Mutex
	m  map[uint64]int
}

func newSeen() *seenSet { return &seenSet{m: map[uint64]int{}} }

func (s *seenSet) add(ids []uint64) {
	s.mu.Lock()
	for _, id := range ids {
		s.m[id]++
	}
	s.mu.Unlock()
}

func (s *seenSet) snapshot() map[uint64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[uint64]int, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

func startUpstream(t *testing.T, seen *seenSet, configure func(*upstream)) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln, done: make(chan struct{}), seen: seen, rnd: rand.New(rand.NewPCG(1, 2))}
	if configure != nil {
		configure(u)
	}
	u.gs = grpc.NewServer()
	otepv1.RegisterStreamExporterServer(u.gs, u)
	go func() {
		defer close(u.done)
		u.gs.Serve(ln)
	}()
	t.Cleanup(u.kill)
	return u
}

func (u *upstream) addr() string { return u.ln.Addr().String() }

// kill stops the server at once, as a crash would: open streams break.
func (u *upstream) kill() {
	u.gs.Stop()
	<-u.done
}

func (u *upstream) ExportTraces(st otepv1.StreamExporter_ExportTracesServer) error {
	for {
		req, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if u.silent.Load() {
			u.unanswered.Add(1)
			continue // forgotten: as if the server lost it
		}
		if u.hold != nil {
			select {
			case <-u.hold:
			case <-st.Context().Done():
				return st.Context().Err()
			}
		}
		n := u.requests.Add(1)
		if u.delay > 0 {
			time.Sleep(u.delay)
		}
		if u.throttleEvery > 0 && n%u.throttleEvery == 0 {
			s, _ := status.New(codes.Unavailable, "throttled").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(u.throttleFor)})
			return s.Err()
		}
		code := otepv1.ResultCode_Success
		u.mu.Lock()
		if u.failPct > 0 && u.rnd.IntN(100) < u.failPct {
			code = otepv1.ResultCode_FailedRetryable
		}
		u.mu.Unlock()
		if code == otepv1.ResultCode_Success {
			u.seen.add(testkit.ResourceSpanIDs(req.ResourceSpans))
		}
		if err := st.Send(&otepv1.ExportResponse{Id: req.Id, ResultCode: code}); err != nil {
			return err
		}
	}
}

// gate is an otlpgate built through internal/gateway, as cmd/otlpgate builds it: the gRPC
// intake, the pipeline, the destinations.
type gate struct {
	gw    *gateway.Gateway
	p     *pipeline.Pipeline
	names []string // of the destinations
	addr  string
	peak  atomic.Int64 // highest QueuedBytes seen by the sampler
	stop  chan struct{}
	wg    sync.WaitGroup
}

// destConfig is a client configuration with test-sized timers.
func destConfig(name, endpoint string) client.Config {
	c := client.DefaultConfig()
	c.Name, c.Endpoint = name, endpoint
	c.Protocol, c.Mode = client.ProtocolOTEP, client.ModeStream
	c.Streams, c.Window = 2, 32
	c.RetryInitial, c.RetryMax, c.RetryMaxElapsed = 10*time.Millisecond, 100*time.Millisecond, time.Minute
	c.AckTimeout = 20 * time.Second
	c.RebalanceTimeout = 0
	return c
}

func startGate(t *testing.T, pc pipeline.Config, dcs ...client.Config) *gate {
	t.Helper()
	g := &gate{stop: make(chan struct{})}
	cfg := gateway.DefaultConfig()
	cfg.GRPC.Listen = "127.0.0.1:0"
	cfg.GRPC.OverloadAfter = time.Hour // per-request FailedRetryable: the load client retries
	cfg.HTTP.Listen, cfg.Kafka.Listen, cfg.UDS.Listen, cfg.Admin.Listen = "", "", "", ""
	cfg.Pipeline = pc
	cfg.Destinations = dcs
	var err error
	if g.gw, err = gateway.New(cfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if err := g.gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.p = g.gw.Pipeline()
	for _, c := range dcs {
		g.names = append(g.names, c.Name)
	}
	g.addr = g.gw.GRPCAddr().String()
	g.wg.Add(1)
	go func() { // sample the queued bytes: the memory bound is checked on every reading
		defer g.wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				if q := g.p.QueuedBytes(); q > g.peak.Load() {
					g.peak.Store(q)
				}
			}
		}
	}()
	t.Cleanup(func() { g.shutdown(t, 5*time.Second) })
	return g
}

// shutdown stops the intake, seals the batches and lets the destinations drain up to d.
func (g *gate) shutdown(t *testing.T, d time.Duration) {
	select {
	case <-g.stop:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	g.gw.Shutdown(ctx) // what is lost at the deadline is the scenario's to judge
	close(g.stop)
	g.wg.Wait()
}

// drained waits (bounded) until every admitted byte was finished by every destination.
func (g *gate) drained(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for g.p.QueuedBytes() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still queued after %v", g.p.QueuedBytes(), within)
		}
		g.p.Flush()
		time.Sleep(5 * time.Millisecond)
	}
}

// load sends n one-span requests (span id = request id) over an OTEP stream to addr, re-sending
// those refused with FailedRetryable, and returns the ids acknowledged with Success. pause, if
// set, is called before each send (to inject faults mid-run).
func load(t *testing.T, addr string, n int, pause func(i int)) map[uint64]bool {
	acked, _ := loadFrom(t, addr, 1, n, pause)
	return acked
}

// loadFrom is load for ids first..first+n-1; it also returns how many answers were
// FailedRetryable (backpressure).
// refusedAll counts the FailedRetryable answers every loadFrom has had, for a test that waits
// for backpressure while its clients still send.
var refusedAll atomic.Int64

func loadFrom(t *testing.T, addr string, first, n int, pause func(i int)) (map[uint64]bool, int) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := otepv1.NewStreamExporterClient(conn).ExportTraces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acked := map[uint64]bool{}
	var mu sync.Mutex
	var refused atomic.Int64
	retry := make(chan uint64, n)
	recvErr := make(chan error, 1)
	outstanding := atomic.Int64{}
	go func() {
		for {
			resp, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			switch resp.ResultCode {
			case otepv1.ResultCode_Success:
				mu.Lock()
				acked[resp.Id] = true
				mu.Unlock()
			case otepv1.ResultCode_FailedRetryable:
				refused.Add(1)
				refusedAll.Add(1)
				retry <- resp.Id
			}
			outstanding.Add(-1)
		}
	}()
	send := func(id uint64) {
		outstanding.Add(1)
		sp := &tracev1.Span{TraceId: make([]byte, 16), SpanId: binary.BigEndian.AppendUint64(nil, id), Name: "reliability",
			Attributes: []*commonv1.KeyValue{{Key: "k", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "v"}}}}}
		req := &otepv1.TraceExportRequest{Id: id, ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{sp}}}}}}
		if err := st.Send(req); err != nil {
			t.Errorf("send %d: %v", id, err)
		}
	}
	for i := first; i < first+n; i++ {
		if pause != nil {
			pause(i)
		}
		send(uint64(i))
		for outstanding.Load() > 256 { // a window, as a real client keeps
			time.Sleep(100 * time.Microsecond)
		}
	}
	// Re-send what was refused until everything is answered with Success (bounded).
	for round := 0; outstanding.Load() > 0 || len(retry) > 0; round++ {
		if round > 20000 {
			t.Fatalf("load: %d requests never answered", outstanding.Load())
		}
		select {
		case id := <-retry:
			time.Sleep(time.Millisecond)
			send(id)
		case err := <-recvErr:
			t.Fatalf("load stream: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	st.CloseSend()
	mu.Lock()
	defer mu.Unlock()
	return acked, int(refused.Load())
}

// checkDelivered asserts every acknowledged id was delivered at least once, and returns the
// duplicates.
func checkDelivered(t *testing.T, acked map[uint64]bool, seen map[uint64]int) (dups int) {
	t.Helper()
	missing := 0
	for id := range acked {
		if seen[id] == 0 {
			missing++
		}
	}
	for _, c := range seen {
		dups += c - 1
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged spans never reached the upstream", missing, len(acked))
	}
	return dups
}

// metric sums a counter or gauge of the default registry over series with the given labels.
func metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.Metric {
			for k, v := range labels {
				if !hasLabel(m, k, v) {
					continue next
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.Label {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}
