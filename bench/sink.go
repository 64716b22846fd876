package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// Sink is a counting OTLP receiver of every signal: the v1 Export services and the OTEP unary
// and stream exporters. It counts batches and spans and, from the send time the load generator stamps into
// each batch, the end-to-end latency of every batch. It stands in for the upstream in proxy
// benchmarks; its own CPU is not what is measured.
type Sink struct {
	gs      *grpc.Server
	ln      net.Listener
	batches atomic.Int64
	spans   atomic.Int64
	bad     atomic.Int64
	served  chan struct{}

	mu struct {
		sync.Mutex
		lat []time.Duration
	}
}

// StartSink listens on listen and serves until Close.
func StartSink(listen string) (*Sink, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	s := &Sink{ln: ln, served: make(chan struct{})}
	s.gs = grpc.NewServer(grpc.ForceServerCodecV2(codec.New(nil)), grpc.MaxRecvMsgSize(64<<20),
		grpc.InitialWindowSize(4<<20), grpc.InitialConnWindowSize(16<<20))
	v1 := []struct {
		service string
		sig     fastpath.Signal
		resp    any
	}{
		{"opentelemetry.proto.collector.trace.v1.TraceService", fastpath.Traces, &coltracev1.ExportTraceServiceResponse{}},
		{"opentelemetry.proto.collector.metrics.v1.MetricsService", fastpath.Metrics, &colmetricsv1.ExportMetricsServiceResponse{}},
		{"opentelemetry.proto.collector.logs.v1.LogsService", fastpath.Logs, &collogsv1.ExportLogsServiceResponse{}},
	}
	unary := &grpc.ServiceDesc{ServiceName: "otlpgate.otep.v1.UnaryExporter", HandlerType: (*any)(nil)}
	stream := &grpc.ServiceDesc{ServiceName: "otlpgate.otep.v1.StreamExporter", HandlerType: (*any)(nil)}
	for i, v := range v1 {
		sig, resp := v.sig, v.resp
		s.gs.RegisterService(&grpc.ServiceDesc{
			ServiceName: v.service,
			HandlerType: (*any)(nil),
			Methods: []grpc.MethodDesc{{MethodName: "Export", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var r codec.Raw
				if err := dec(&r); err != nil {
					return nil, err
				}
				s.take(sig, r.Bytes(), fastpath.LayoutV1)
				r.Release()
				return resp, nil
			}}},
		}, s)
		method := [...]string{"ExportTraces", "ExportMetrics", "ExportLogs"}[i]
		unary.Methods = append(unary.Methods, grpc.MethodDesc{MethodName: method, Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var r codec.Raw
			if err := dec(&r); err != nil {
				return nil, err
			}
			id := s.take(sig, r.Bytes(), fastpath.LayoutOTEP)
			r.Release()
			return &otepv1.ExportResponse{Id: id}, nil
		}})
		stream.Streams = append(stream.Streams, grpc.StreamDesc{StreamName: method, ClientStreams: true, ServerStreams: true,
			Handler: func(_ any, st grpc.ServerStream) error {
				var r codec.Raw
				var resp otepv1.ExportResponse
				for {
					r.Release()
					if err := st.RecvMsg(&r); err != nil {
						if errors.Is(err, io.EOF) {
							return nil
						}
						return err
					}
					resp.Id = s.take(sig, r.Bytes(), fastpath.LayoutOTEP)
					if err := st.SendMsg(&resp); err != nil {
						return err
					}
				}
			}})
	}
	s.gs.RegisterService(unary, s)
	s.gs.RegisterService(stream, s)
	go func() {
		defer close(s.served)
		s.gs.Serve(ln)
	}()
	return s, nil
}

// take counts one request and returns its OTEP id.
func (s *Sink) take(sig fastpath.Signal, b []byte, layout fastpath.Layout) uint64 {
	now := time.Now().UnixNano()
	sc, err := fastpath.ScanRequest(sig, b, layout, fastpath.DepthResource)
	if err != nil {
		s.bad.Add(1)
		return 0
	}
	s.batches.Add(1)
	s.spans.Add(int64(sc.Items))
	// A batch forwarded by a proxy may hold several requests; each carries its own stamp.
	for _, st := range stamps(b) {
		if d := since(st, now); d >= 0 {
			s.mu.Lock()
			s.mu.lat = append(s.mu.lat, time.Duration(d))
			s.mu.Unlock()
		}
	}
	return sc.ID
}

// ServeAlso serves the sink on one more listener and returns its address: a balanced
// destination sees each address as a backend of its own, with its own connection, while the
// counts stay in one place. Call it before Close.
func (s *Sink) ServeAlso(listen string) (string, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", err
	}
	go s.gs.Serve(ln) // returns when Close stops the server
	return ln.Addr().String(), nil
}

// Addr is the sink's address.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Counts returns the batches and items (spans, data points, log records) received and the
// requests that did not scan.
func (s *Sink) Counts() (batches, spans, bad int64) {
	return s.batches.Load(), s.spans.Load(), s.bad.Load()
}

// Latencies returns the sorted end-to-end latencies seen so far.
func (s *Sink) Latencies() []time.Duration {
	s.mu.Lock()
	l := append([]time.Duration(nil), s.mu.lat...)
	s.mu.Unlock()
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l
}

// Reset forgets counts and latencies (between a warm-up and the measured run).
func (s *Sink) Reset() {
	s.batches.Store(0)
	s.spans.Store(0)
	s.bad.Store(0)
	s.mu.Lock()
	s.mu.lat = s.mu.lat[:0]
	s.mu.Unlock()
}

// Close stops the sink.
func (s *Sink) Close() {
	s.gs.Stop()
	<-s.served
}

// Percentile returns the p-th percentile (0..1) of sorted latencies.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}
