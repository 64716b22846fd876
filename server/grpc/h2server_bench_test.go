package grpcserver

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// memConn is a connection in memory for one h2Conn: the test hands it what the client sends,
// one chunk a read, and learns of each write the server makes (its bytes kept in last), so
// that a request's whole path on the server (read, decode, admit, answer, write) runs on the
// connection's own goroutine with nothing of a socket's in it.
type memConn struct {
	in      chan []byte
	cur     []byte
	wrote   chan struct{}
	last    []byte
	log     []byte // every byte written, when keepLog
	keepLog bool
	closed  chan struct{}
	once    sync.Once
}

func newMemConn() *memConn {
	return &memConn{in: make(chan []byte), wrote: make(chan struct{}, 1), last: make([]byte, 0, 64<<10), closed: make(chan struct{})}
}

var memAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4317}

func (c *memConn) Read(p []byte) (int, error) {
	if len(c.cur) == 0 {
		select {
		case c.cur = <-c.in:
		case <-c.closed:
			return 0, io.EOF
		}
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

func (c *memConn) Write(p []byte) (int, error) {
	c.last = append(c.last[:0], p...)
	if c.keepLog {
		c.log = append(c.log, p...)
	}
	select {
	case c.wrote <- struct{}{}:
	case <-c.closed:
		return 0, io.ErrClosedPipe
	}
	return len(p), nil
}

func (c *memConn) Close() error                     { c.once.Do(func() { close(c.closed) }); return nil }
func (c *memConn) LocalAddr() net.Addr              { return memAddr }
func (c *memConn) RemoteAddr() net.Addr             { return memAddr }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// h2Harness is a Server on the own transport, a pipeline into a discarding destination, and
// one connection past its preface and SETTINGS exchange.
type h2Harness struct {
	p      *pipeline.Pipeline
	sink   *testkit.Discard
	c      *h2Conn // touched by the test only between calls, under its mu
	mc     *memConn
	req    []byte // HEADERS and DATA of one call; the stream id written per call
	dataAt int    // where the DATA frame starts in req
	next   uint32
}

// newH2Harness's calls send body, and the extra header fields.
func newH2Harness(tb testing.TB, body []byte, extra ...h2.HeaderField) *h2Harness {
	tb.Helper()
	h := &h2Harness{sink: &testkit.Discard{}, mc: newMemConn(), next: 1}
	pc := pipeline.DefaultConfig()
	pc.BatchMaxAge = 1 << 62
	var err error
	if h.p, err = pipeline.New(pc, []pipeline.Destination{h.sink}); err != nil {
		tb.Fatal(err)
	}
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	s, err := New(sc, h.p, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	c := s.newH2Conn(h.mc)
	h.c = c
	if !s.h2.add(c) {
		tb.Fatal("not added")
	}
	done := make(chan struct{})
	go func() { defer close(done); c.serve() }()
	tb.Cleanup(func() {
		h.mc.Close()
		<-done
		h.p.Close()
		s.gs.Stop()
	})
	<-h.mc.wrote // the server's SETTINGS
	hello := append([]byte(h2.ClientPreface), appendSettings(nil, false, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})...)
	hello = appendWindowUpdate(hello, 0, 8<<20)
	h.mc.in <- hello
	<-h.mc.wrote // the ACK
	block := h2.AppendHeaderBlock(nil, h2.GRPCRequestHeaders("http", "otlpgate", tracesPath, "", "bench", extra...)...)
	h.req = h2.AppendFrameHeader(nil, h2.FrameHeader{Length: uint32(len(block)), Type: http2.FrameHeaders, Flags: http2.FlagHeadersEndHeaders})
	h.req = append(h.req, block...)
	h.dataAt = len(h.req)
	msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
	h.req = appendDataFrame(h.req, 0, true, append(msg, body...))
	return h
}

// call sends one call and waits for the server's write of its answer; it returns the bytes
// written.
func (h *h2Harness) call() []byte {
	id := h.next
	h.next += 2
	binary.BigEndian.PutUint32(h.req[5:], id)
	binary.BigEndian.PutUint32(h.req[h.dataAt+5:], id)
	h.mc.in <- h.req
	<-h.mc.wrote
	return h.mc.last
}

// appendOKAnswer appends the answer the own transport writes for one accepted call on stream
// id: its headers, the empty ExportTraceServiceResponse, its trailers.
func appendOKAnswer(dst []byte, id uint32) []byte {
	dst = h2RespHeaders.Append(dst, id)
	dst = appendDataFrame(dst, id, false, []byte{0, 0, 0, 0, 0})
	return h2TrailersOK.Append(dst, id)
}

// BenchmarkH2Unary is one unary v1 call of 50 spans on otlpgate's own transport, on the
// server: read from the connection, decoded, admitted into the pipeline, answered and written
// (in memory: no socket).
// With deadline, its client sends a grpc-timeout, as OTel SDKs do (10 s by default); with
// binary, an OpenCensus grpc-trace-bin, whose value is checked as grpc-go decodes it.
func BenchmarkH2Unary(b *testing.B) {
	body := traceBody(b, 1, 50)
	for _, bc := range []struct {
		name  string
		extra []h2.HeaderField
	}{{"plain", nil}, {"deadline", []h2.HeaderField{{Name: "grpc-timeout", Value: "10S"}}},
		{"binary", []h2.HeaderField{{Name: "grpc-trace-bin", Value: "AABhYmNkZWZnaGlqa2xtbm9wAWFiY2RlZmdoAgE"}}}} {
		b.Run(bc.name, func(b *testing.B) {
			h := newH2Harness(b, body, bc.extra...)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				h.call()
			}
		})
	}
}

// BenchmarkV1UnaryLoopback is a unary v1 call of 50 spans from grpc-go's client to the
// intake on loopback, on each transport, with parallel callers: client and server in one
// process, so the figures (CPU, allocations) are both ends'; the difference between the two
// transports is the server's.
func BenchmarkV1UnaryLoopback(b *testing.B) {
	body := traceBody(b, 1, 50)
	for _, tr := range transports {
		b.Run(tr, func(b *testing.B) {
			pc := pipeline.DefaultConfig()
			pc.BatchMaxAge = 1 << 62
			p, err := pipeline.New(pc, []pipeline.Destination{&testkit.Discard{}})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			sc := DefaultConfig()
			sc.Transport = tr
			srv, err := New(sc, p, slog.New(slog.DiscardHandler))
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
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var req codec.Raw
				var resp coltracev1.ExportTraceServiceResponse
				for pb.Next() {
					req.SetBytes(body)
					if err := conn.Invoke(context.Background(), tracesPath, &req, &resp); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
