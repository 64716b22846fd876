package grpcserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// totals is what rec received: the bytes of each batch, and the items of all.
func totals(rec *testkit.Recorder) (batches [][]byte, items int) {
	for _, g := range rec.Received() {
		batches = append(batches, g.Body)
		items += g.Items
	}
	return batches, items
}

type env struct {
	p    *pipeline.Pipeline
	srv  *Server
	rec  *testkit.Recorder
	conn *grpc.ClientConn // typed messages, default codec
	raw  *grpc.ClientConn // codec.Raw requests
}

func start(t *testing.T, pc pipeline.Config, sc Config, rec *testkit.Recorder) *env {
	t.Helper()
	return startWith(t, pc, sc, rec)
}

// startWith is start with dests in front of the pipeline instead of rec (which the
// environment still releases at the end).
func startWith(t *testing.T, pc pipeline.Config, sc Config, rec *testkit.Recorder, dests ...pipeline.Destination) *env {
	t.Helper()
	if rec == nil {
		rec = &testkit.Recorder{}
	}
	if len(dests) == 0 {
		dests = []pipeline.Destination{rec}
	}
	p, err := pipeline.New(pc, dests)
	if err != nil {
		t.Fatal(err)
	}
	sc.Listen = "127.0.0.1:0"
	srv, err := New(sc, p, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(ln)
	e := &env{p: p, srv: srv, rec: rec}
	e.conn, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	e.raw, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.conn.Close()
		e.raw.Close()
		rec.Release(true)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		p.Close()
	})
	return e
}

func testPipelineConfig() pipeline.Config {
	c := pipeline.DefaultConfig()
	c.BatchMaxAge = time.Hour // tests flush explicitly
	return c
}

// rawStream opens an OTEP trace stream that sends raw bytes and receives typed responses.
func (e *env) rawStream(t *testing.T, ctx context.Context) grpc.ClientStream {
	t.Helper()
	s, err := e.raw.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		"/otlpgate.otep.v1.StreamExporter/ExportTraces")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sendRaw(t *testing.T, s grpc.ClientStream, b []byte) {
	t.Helper()
	var r codec.Raw
	r.SetBytes(b)
	if err := s.SendMsg(&r); err != nil {
		t.Fatal(err)
	}
}

func recvResp(t *testing.T, s grpc.ClientStream) (*otepv1.ExportResponse, error) {
	t.Helper()
	resp := &otepv1.ExportResponse{}
	if err := s.RecvMsg(resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// drainEOF reads what is left of a stream and returns its final error (nil for a clean end).
func drainEOF(s grpc.ClientStream) (extra int, err error) {
	for {
		if err := s.RecvMsg(&otepv1.ExportResponse{}); err != nil {
			if err == io.EOF {
				return extra, nil
			}
			return extra, err
		}
		extra++
	}
}

// onTransports runs f once per transport (-grpc.transport), as a subtest named after it.
func onTransports(t *testing.T, f func(t *testing.T, tr string)) {
	t.Helper()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { f(t, tr) })
	}
}

// configFor is the default config on transport tr.
func configFor(tr string) Config {
	c := DefaultConfig()
	c.Transport = tr
	return c
}
