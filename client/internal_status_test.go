package client

import (
	"bytes"
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/otlpgate/otlpgate/fastpath"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// strictV1 is an OTLP/gRPC v1 trace upstream as the Collector's receiver is one: grpc-go's own
// server and protobuf codec, which answer a request that does not decode (here: a string that
// is not UTF-8) with INTERNAL before the service sees it. The service answers INTERNAL, with a
// RetryInfo, to spans named "internal". arrivals counts every call the transport took, decoded
// or not.
type strictV1 struct {
	coltracev1.UnimplementedTraceServiceServer
	mu       sync.Mutex
	arrivals int
	names    []string // the first span name of each request the service saw
}

func (s *strictV1) Export(_ context.Context, r *coltracev1.ExportTraceServiceRequest) (*coltracev1.ExportTraceServiceResponse, error) {
	name := r.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0].GetName()
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
	if name == "internal" {
		st, _ := status.New(codes.Internal, "store failed").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(10 * time.Millisecond)})
		return nil, st.Err()
	}
	return &coltracev1.ExportTraceServiceResponse{}, nil
}

func startStrictV1(t *testing.T) (*strictV1, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &strictV1{}
	srv := grpc.NewServer(grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
		s.mu.Lock()
		s.arrivals++
		s.mu.Unlock()
		return ctx, nil
	}))
	coltracev1.RegisterTraceServiceServer(srv, s)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return s, ln.Addr().String()
}

// The OTLP specification lists INTERNAL as not retryable, and grpc-go (the Collector's
// receiver too) answers a request it cannot decode with INTERNAL: sending it again would fail
// the same way for as long as the retry budget lasts. Such a request is dropped at once,
// counted under rejected, and the batches around it are delivered. A RetryInfo does not make
// INTERNAL retryable: the specification gives it that meaning for RESOURCE_EXHAUSTED (and as a
// throttle for UNAVAILABLE) only, as the Collector's exporter reads it.
func TestV1InternalIsDroppedNotRetried(t *testing.T) {
	up, addr := startStrictV1(t)
	cfg := unaryConfig(t, addr, ProtocolV1, 1)
	d := startDest(t, cfg)
	f := newFeeder(t, d)

	bad := traceBody("b1-utf8", 1, 10)
	i := bytes.Index(bad, []byte("b1-utf8"))
	bad[i+2] = 0xff // the span name is no longer UTF-8: the server cannot decode the request
	f.sendSignal(fastpath.Traces, "b0", traceBody("b0", 1, 10))
	f.sendSignal(fastpath.Traces, "b1", bad)
	f.sendSignal(fastpath.Traces, "b2", traceBody("internal", 1, 10))
	f.sendSignal(fastpath.Traces, "b3", traceBody("b3", 1, 10))
	if got, want := f.waitAll(), []bool{true, false, false, true}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	up.mu.Lock()
	arrivals, names := up.arrivals, slices.Clone(up.names)
	up.mu.Unlock()
	if arrivals != 4 || !slices.Equal(names, []string{"b0", "internal", "b3"}) {
		t.Errorf("the upstream took %d calls and decoded %q; want 4 calls, one each, and b0, internal, b3 decoded", arrivals, names)
	}
	if got := value(d.m.dropped[DropRejected]); got != 2 {
		t.Errorf("dropped as rejected: %d, want 2", got)
	}
	for r := range numRetryReasons {
		if got := value(d.m.retried[r]); got != 0 {
			t.Errorf("retried %d with reason %s, want none", got, r)
		}
	}
	if got := value(d.m.throttles); got != 0 {
		t.Errorf("%d throttles: a RetryInfo on INTERNAL is no throttle", got)
	}
}
