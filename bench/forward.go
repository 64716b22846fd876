package bench

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/codec"
)

// Forwarder is the floor of the proxy benchmark: a grpc-go server that takes each v1 Export call
// as raw bytes and forwards it as it is, with one unary call to the target, answering with the
// target's answer. No scan, no batching, no queue: what it costs per batch is what grpc-go,
// x/net and the runtime cost any forwarder.
type Forwarder struct {
	gs    *grpc.Server
	conn  *grpc.ClientConn
	ln    net.Listener
	admin *http.Server
	aln   net.Listener
	done  chan struct{}
}

// v1Methods are the full method names of the OTLP v1 Export calls.
var v1Methods = []string{
	"/opentelemetry.proto.collector.trace.v1.TraceService/Export",
	"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
	"/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}

// StartForwarder listens on listen and forwards to target; admin, if set, serves /metrics and
// /debug/pprof/ as otlpgate's admin listener does, so that the same measurements apply.
func StartForwarder(listen, target, admin string) (*Forwarder, error) {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil)), grpc.MaxCallSendMsgSize(64<<20)),
		grpc.WithInitialWindowSize(4<<20), grpc.WithInitialConnWindowSize(16<<20))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		conn.Close()
		return nil, err
	}
	f := &Forwarder{conn: conn, ln: ln, done: make(chan struct{})}
	f.gs = grpc.NewServer(grpc.ForceServerCodecV2(codec.New(nil)), grpc.MaxRecvMsgSize(64<<20),
		grpc.InitialWindowSize(4<<20), grpc.InitialConnWindowSize(16<<20))
	for _, full := range v1Methods {
		method := full
		service, name := splitMethod(full)
		f.gs.RegisterService(&grpc.ServiceDesc{ServiceName: service, HandlerType: (*any)(nil),
			Methods: []grpc.MethodDesc{{MethodName: name, Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var req codec.Raw
				if err := dec(&req); err != nil {
					return nil, err
				}
				defer req.Release()
				resp := new(codec.Raw)
				if err := f.conn.Invoke(ctx, method, &req, resp); err != nil {
					return nil, err
				}
				return resp, nil
			}}},
		}, f)
	}
	go func() {
		defer close(f.done)
		f.gs.Serve(ln)
	}()
	if admin != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.Handler())
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		aln, err := net.Listen("tcp", admin)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.admin, f.aln = &http.Server{Handler: mux}, aln
		go f.admin.Serve(aln)
	}
	return f, nil
}

func splitMethod(full string) (service, method string) {
	for i := len(full) - 1; i > 0; i-- {
		if full[i] == '/' {
			return full[1:i], full[i+1:]
		}
	}
	return full, ""
}

// Addr is the address the forwarder listens on.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// AdminAddr is the address of the admin listener, empty without one.
func (f *Forwarder) AdminAddr() string {
	if f.aln == nil {
		return ""
	}
	return f.aln.Addr().String()
}

// Close stops serving and closes the upstream connection.
func (f *Forwarder) Close() {
	if f.admin != nil {
		f.admin.Close()
	}
	f.gs.Stop()
	<-f.done
	f.conn.Close()
}
