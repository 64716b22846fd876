package strictsink

import (
	"context"
	"fmt"
	"net"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
)

// services are the OTLP v1 Export services by signal.
var services = [fastpath.NumSignals]string{
	fastpath.Traces:  "opentelemetry.proto.collector.trace.v1.TraceService",
	fastpath.Metrics: "opentelemetry.proto.collector.metrics.v1.MetricsService",
	fastpath.Logs:    "opentelemetry.proto.collector.logs.v1.LogsService",
}

// Sink is a running strict upstream. Its zero value is not usable: call Start.
type Sink struct {
	gs   *grpc.Server
	ln   net.Listener
	done chan struct{}

	mu struct {
		sync.Mutex
		traces   []ptrace.Traces
		metrics  []pmetric.Metrics
		logs     []plog.Logs
		accepted [fastpath.NumSignals]int
		refused  [fastpath.NumSignals]int
		lastErr  error // the decoder's error for the latest refused request
	}
}

// Start listens on addr ("127.0.0.1:0" for any free port) and serves until Close.
func Start(addr string) (*Sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("strictsink: cannot listen on %s: %w", addr, err)
	}
	s := &Sink{ln: ln, done: make(chan struct{})}
	// Raw bytes in, so that the Collector's decoder is the only one that sees them.
	s.gs = grpc.NewServer(grpc.ForceServerCodecV2(codec.New(nil)))
	for sig := range fastpath.NumSignals {
		s.gs.RegisterService(&grpc.ServiceDesc{
			ServiceName: services[sig],
			HandlerType: (*any)(nil),
			Methods:     []grpc.MethodDesc{{MethodName: "Export", Handler: s.export(sig)}},
			Metadata:    "strictsink",
		}, s)
	}
	go func() {
		defer close(s.done)
		_ = s.gs.Serve(ln)
	}()
	return s, nil
}

// Addr is the address the sink listens on, host:port.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Close stops the server at once, breaking open calls, and waits for it to end.
func (s *Sink) Close() {
	s.gs.Stop()
	<-s.done
}

// export handles the Export call of one signal.
func (s *Sink) export(sig fastpath.Signal) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var raw codec.Raw
		defer raw.Release()
		if err := dec(&raw); err != nil {
			return nil, err
		}
		if err := s.decode(sig, raw.Bytes()); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "strictsink: pdata refuses the request: %v", err)
		}
		// An empty Export*ServiceResponse: no partial success.
		var resp codec.Raw
		resp.SetBytes(nil)
		return &resp, nil
	}
}

// decode decodes b with pdata's ProtoUnmarshaler of sig and records the result.
func (s *Sink) decode(sig fastpath.Signal, b []byte) error {
	var err error
	var td ptrace.Traces
	var md pmetric.Metrics
	var ld plog.Logs
	switch sig {
	case fastpath.Traces:
		td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	case fastpath.Metrics:
		md, err = (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(b)
	case fastpath.Logs:
		ld, err = (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.mu.refused[sig]++
		s.mu.lastErr = err
		return err
	}
	s.mu.accepted[sig]++
	switch sig {
	case fastpath.Traces:
		s.mu.traces = append(s.mu.traces, td)
	case fastpath.Metrics:
		s.mu.metrics = append(s.mu.metrics, md)
	case fastpath.Logs:
		s.mu.logs = append(s.mu.logs, ld)
	}
	return nil
}

// Accepted and Refused count the Export calls of sig the decoder took and refused.
func (s *Sink) Accepted(sig fastpath.Signal) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.accepted[sig]
}

func (s *Sink) Refused(sig fastpath.Signal) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.refused[sig]
}

// LastError is the decoder's error for the latest refused request, nil if none was refused.
func (s *Sink) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.lastErr
}

// Traces, Metrics and Logs return the requests accepted so far, decoded, in the order they
// arrived. The data is the sink's: read it, do not modify it.
func (s *Sink) Traces() []ptrace.Traces {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ptrace.Traces(nil), s.mu.traces...)
}

func (s *Sink) Metrics() []pmetric.Metrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pmetric.Metrics(nil), s.mu.metrics...)
}

func (s *Sink) Logs() []plog.Logs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]plog.Logs(nil), s.mu.logs...)
}

// Spans counts the spans accepted so far by span id: a test that gives every span its own id
// reads deliveries and duplicates from it.
func (s *Sink) Spans() map[pcommon.SpanID]int {
	out := map[pcommon.SpanID]int{}
	for _, td := range s.Traces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					out[sp.SpanID()]++
				}
			}
		}
	}
	return out
}
