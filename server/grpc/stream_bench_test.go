package grpcserver

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// BenchmarkOTEPStream measures one pipelined OTEP stream end to end on loopback, on each
// transport: the cost per request of receiving on the stream's own goroutine (drain.go) shows
// on grpc-go's; client and server share the process, so the difference between the two is the
// server's.
func BenchmarkOTEPStream(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr, func(b *testing.B) { benchmarkOTEPStream(b, tr) })
	}
}

func benchmarkOTEPStream(b *testing.B, tr string) {
	pc := pipeline.DefaultConfig()
	pc.BatchMaxAge = 10 * time.Millisecond
	p, err := pipeline.New(pc, []pipeline.Destination{&testkit.Discard{}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	srv, err := New(configFor(tr), p, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil))))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		"/otlpgate.otep.v1.StreamExporter/ExportTraces")
	if err != nil {
		b.Fatal(err)
	}
	req := otepReq(b, 1, traceBody(b, 1, 10))
	var raw codec.Raw
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		resp := &otepv1.ExportResponse{}
		for range b.N {
			if err := s.RecvMsg(resp); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for range b.N {
		raw.SetBytes(req)
		if err := s.SendMsg(&raw); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	s.CloseSend()
	s.RecvMsg(&otepv1.ExportResponse{})
}
