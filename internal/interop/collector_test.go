package interop

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// The Collector's gRPC client and server are configgrpc's, as its OTLP exporter and receiver
// build them (ClientConfig.ToClientConn, ServerConfig.ToServer, with the defaults of
// NewDefault*Config), carrying pdata's requests (ptraceotlp and its kind). configgrpc
// registers the Collector's own zstd compressor with grpc-go: a zstd peer of otlpgate's.

func collectorSettings() component.TelemetrySettings {
	return component.TelemetrySettings{Logger: zap.NewNop(), TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
}

// pdataCalls exports calls through conn as the Collector's exporter does, each answered
// before the next.
func pdataCalls(t *testing.T, conn *grpc.ClientConn, calls []call) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range calls {
		var err error
		switch c.Signal {
		case "traces":
			td := ptrace.NewTraces()
			spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
			for i := range c.Count {
				var id [8]byte
				binary.BigEndian.PutUint64(id[:], c.First+uint64(i))
				sp := spans.AppendEmpty()
				var tid [16]byte
				copy(tid[8:], id[:])
				sp.SetTraceID(pcommon.TraceID(tid))
				sp.SetSpanID(pcommon.SpanID(id))
				sp.SetName("collector")
				sp.Attributes().PutStr("pad", strings.Repeat("c", c.Pad))
			}
			_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		case "metrics":
			md := pmetric.NewMetrics()
			ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
			for i, n := range c.Names {
				m := ms.AppendEmpty()
				m.SetName(n)
				m.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(int64(i))
			}
			_, err = pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
		case "logs":
			ld := plog.NewLogs()
			rs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
			for _, b := range c.Bodies {
				rs.AppendEmpty().Body().SetStr(b)
			}
			_, err = plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(ld))
		}
		if err != nil {
			t.Fatalf("the Collector's client, export of %s: %v", c.Signal, err)
		}
	}
}

// The Collector's OTLP exporter's gRPC client (configgrpc, pdata) exports every signal and a
// 2 MiB request to the intake on both transports: uncompressed, gzip over TLS (configtls),
// and zstd with the Collector's own zstd compressor. The strict upstream gets exactly what
// was sent, each item once, and the intake counts the compressed requests as arriving in
// their encoding (-grpc.passthrough-encoding set to it).
func TestCollectorClient(t *testing.T) {
	for _, tr := range transports {
		for _, comp := range []string{"none", "gzip", "zstd"} {
			t.Run(tr+"/"+comp, func(t *testing.T) {
				t.Parallel()
				sink, err := strictsink.Start("127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(sink.Close)
				args := []string{"-grpc.transport", tr, "-dest", "name=up,endpoint=" + sink.Addr() + ",protocol=v1,retry-initial=20ms"}
				cc := configgrpc.NewDefaultClientConfig()
				cc.TLS.Insecure = true
				switch comp {
				case "gzip":
					cc.Compression = "gzip"
					cert, key := testkit.SelfSigned(t, t.TempDir())
					args = append(args, "-grpc.tls.cert", cert, "-grpc.tls.key", key)
					cc.TLS.Insecure = false
					cc.TLS.CAFile = cert
				case "zstd":
					cc.Compression = "zstd"
					args = append(args, "-grpc.passthrough-encoding", "zstd")
				}
				g := startGate(t, args...)
				cc.Endpoint = g.GRPC
				conn, err := cc.ToClientConn(context.Background(), nil, collectorSettings())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				calls := plan("collector-"+tr+"-"+comp, 1, true)
				pdataCalls(t, conn, calls)
				var w want
				w.add(calls)
				checkSink(t, sink, w)
				n := g.metric(t, "otlpgate_fastpath_passthrough_requests_total")
				if comp == "none" && n != 0 || comp != "none" && n < float64(len(calls)) {
					t.Errorf("the intake counted %v requests arriving in %s, of %d sent", n, comp, len(calls))
				}
			})
		}
	}
}

// collectorServer is the Collector's OTLP receiver's gRPC server (configgrpc's, with its
// defaults) serving pdata's three Export services, recording what it decoded and the
// grpc-encoding of each request.
type collectorServer struct {
	addr string

	mu struct {
		sync.Mutex
		lines []peerLine
	}
}

func (s *collectorServer) lines() []peerLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]peerLine(nil), s.mu.lines...)
}

func (s *collectorServer) add(l peerLine) {
	s.mu.Lock()
	s.mu.lines = append(s.mu.lines, l)
	s.mu.Unlock()
}

// TagRPC, HandleRPC, TagConn and HandleConn make it a stats.Handler: the only place grpc-go
// shows a server the grpc-encoding a request came in.
func (s *collectorServer) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}
func (s *collectorServer) HandleRPC(_ context.Context, st stats.RPCStats) {
	if h, ok := st.(*stats.InHeader); ok {
		enc := h.Compression
		if enc == "" {
			enc = "identity"
		}
		sig := map[string]string{"/opentelemetry.proto.collector.trace.v1.TraceService/Export": "traces",
			"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export": "metrics",
			"/opentelemetry.proto.collector.logs.v1.LogsService/Export":       "logs"}[h.FullMethod]
		s.add(peerLine{Signal: sig, Encoding: enc})
	}
}
func (s *collectorServer) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (s *collectorServer) HandleConn(context.Context, stats.ConnStats) {}

type collectorTraces struct {
	*collectorServer
	ptraceotlp.UnimplementedGRPCServer
}

type collectorMetrics struct {
	*collectorServer
	pmetricotlp.UnimplementedGRPCServer
}

type collectorLogs struct {
	*collectorServer
	plogotlp.UnimplementedGRPCServer
}

func (s *collectorTraces) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	var ids []string
	for _, rs := range req.Traces().ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				id := sp.SpanID()
				ids = append(ids, hex.EncodeToString(id[:]))
			}
		}
	}
	s.add(peerLine{Signal: "traces", IDs: ids})
	return ptraceotlp.NewExportResponse(), nil
}

func (s *collectorMetrics) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	var names []string
	for _, rm := range req.Metrics().ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				names = append(names, m.Name())
			}
		}
	}
	s.add(peerLine{Signal: "metrics", IDs: names})
	return pmetricotlp.NewExportResponse(), nil
}

func (s *collectorLogs) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	var bodies []string
	for _, rl := range req.Logs().ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				bodies = append(bodies, lr.Body().Str())
			}
		}
	}
	s.add(peerLine{Signal: "logs", IDs: bodies})
	return plogotlp.NewExportResponse(), nil
}

func startCollectorServer(t *testing.T) *collectorServer {
	t.Helper()
	s := &collectorServer{}
	sc := configgrpc.NewDefaultServerConfig()
	sc.NetAddr.Endpoint = "127.0.0.1:0"
	sc.MaxRecvMsgSizeMiB = 64
	gs, err := sc.ToServer(context.Background(), nil, collectorSettings(), configgrpc.WithGrpcServerOption(grpc.StatsHandler(s)))
	if err != nil {
		t.Fatal(err)
	}
	ptraceotlp.RegisterGRPCServer(gs, &collectorTraces{collectorServer: s})
	pmetricotlp.RegisterGRPCServer(gs, &collectorMetrics{collectorServer: s})
	plogotlp.RegisterGRPCServer(gs, &collectorLogs{collectorServer: s})
	ln, err := sc.NetAddr.Listen(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return s
}

// The Collector's OTLP receiver's gRPC server (configgrpc, pdata) is the upstream of a
// destination on both transports, uncompressed, gzip and zstd (decompressed by the
// Collector's own zstd): it decodes exactly what was sent, each item once, the 2 MiB batch
// included, every request in the destination's grpc-encoding.
func TestCollectorServer(t *testing.T) {
	for _, tr := range transports {
		for _, comp := range []string{"identity", "gzip", "zstd"} {
			t.Run(fmt.Sprintf("%s/%s", tr, comp), func(t *testing.T) {
				t.Parallel()
				s := startCollectorServer(t)
				dest := "name=collector,protocol=v1,retry-initial=20ms,transport=" + tr + ",endpoint=" + s.addr
				if comp != "identity" {
					dest += ",compression=" + comp
				}
				g := startGate(t, "-batch.max-bytes", "8MiB", "-dest", dest)
				calls := plan("collector-"+tr+"-"+comp, 1, true)
				sendToGate(t, g.GRPC, calls)
				var w want
				w.add(calls)
				checkPeer(t, s, w, comp)
			})
		}
	}
}
