package grpcserver

import (
	"google.golang.org/grpc"

	"github.com/otlpgate/otlpgate/fastpath"
)

// serviceDescs describes the services by hand rather than through the generated registration
// functions: the generated handlers decode requests into messages, and these must receive raw
// bytes. Service and method names are those of the .proto files.
func (s *Server) serviceDescs() []*grpc.ServiceDesc {
	v1 := func(name string, sig fastpath.Signal, file string) *grpc.ServiceDesc {
		return &grpc.ServiceDesc{
			ServiceName: name,
			HandlerType: (*any)(nil),
			Methods:     []grpc.MethodDesc{{MethodName: "Export", Handler: s.v1Export(sig)}},
			Metadata:    file,
		}
	}
	const otepFile = "otep/v1/otep.proto"
	sigs := []struct {
		method string
		sig    fastpath.Signal
	}{{"ExportTraces", fastpath.Traces}, {"ExportMetrics", fastpath.Metrics}, {"ExportLogs", fastpath.Logs}}
	unary := &grpc.ServiceDesc{ServiceName: "otlpgate.otep.v1.UnaryExporter", HandlerType: (*any)(nil), Metadata: otepFile}
	stream := &grpc.ServiceDesc{ServiceName: "otlpgate.otep.v1.StreamExporter", HandlerType: (*any)(nil), Metadata: otepFile}
	for _, m := range sigs {
		unary.Methods = append(unary.Methods, grpc.MethodDesc{MethodName: m.method, Handler: s.otepUnary(m.sig)})
		stream.Streams = append(stream.Streams, grpc.StreamDesc{
			StreamName: m.method, Handler: s.otepStream(m.sig), ServerStreams: true, ClientStreams: true,
		})
	}
	return []*grpc.ServiceDesc{
		v1("opentelemetry.proto.collector.trace.v1.TraceService", fastpath.Traces, "opentelemetry/proto/collector/trace/v1/trace_service.proto"),
		v1("opentelemetry.proto.collector.metrics.v1.MetricsService", fastpath.Metrics, "opentelemetry/proto/collector/metrics/v1/metrics_service.proto"),
		v1("opentelemetry.proto.collector.logs.v1.LogsService", fastpath.Logs, "opentelemetry/proto/collector/logs/v1/logs_service.proto"),
		unary, stream,
	}
}
