package grpcserver

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// spanCounter is a destination that counts how often each span id reached it and keeps no
// bytes: the requests of the test below are 15 MB each.
type spanCounter struct {
	mu  sync.Mutex
	ids map[uint64]int
	bad int
}

func (*spanCounter) Name() string { return "counter" }

func (c *spanCounter) Enqueue(b *pipeline.Batch) error {
	ids, err := testkit.SpanIDs(b.Payload.Bytes())
	c.mu.Lock()
	if err != nil {
		c.bad++
	}
	for _, id := range ids {
		c.ids[id]++
	}
	c.mu.Unlock()
	b.Done(true)
	return nil
}

// Concurrent calls on one connection, each within -grpc.max-recv-msg-size (15 MB against its
// default 16 MiB), more of them than the connection's share of the intake limiter
// (-intake.max-conn-bytes, 64 MiB: four messages of the largest size) admits at once, with
// every bound at its default. Those admitted are read; the others wait, and are refused per
// call with RESOURCE_EXHAUSTED and RetryInfo, which the client honours. The connection is
// never closed under the calls (before, four 15 MB messages being read passed
// -grpc.max-conn-recv-bytes, 32 MiB, and the connection was closed with every call on it), and
// every request is delivered exactly once.
func TestConcurrentLargeCallsOnOneConnection(t *testing.T) {
	const (
		workers, each = 6, 2
		bodyBytes     = 15_000_000
	)
	sc := DefaultConfig()
	lim := admission.NewLimiter(admission.DefaultLimiterConfig())
	sc.Limiter = lim
	pc := testPipelineConfig()
	pc.BatchMaxAge = 5 * time.Millisecond
	dest := &spanCounter{ids: map[uint64]int{}}
	e := startWith(t, pc, sc, nil, dest)

	var dials atomic.Int32
	cc, err := grpc.NewClient(e.srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(sc.MaxRecvMsgSize)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := coltracev1.NewTraceServiceClient(cc)
	closedBefore := testutil.ToFloat64(closedConns[closeRecvBytes])

	padding := strings.Repeat("x", bodyBytes)
	request := func(id uint64) *coltracev1.ExportTraceServiceRequest {
		sid := make([]byte, 8)
		binary.BigEndian.PutUint64(sid, id)
		return &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
			ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
				TraceId: append(make([]byte, 8), sid...), SpanId: sid, Name: "large",
				Attributes: []*commonv1.KeyValue{{Key: "padding",
					Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: padding}}}},
			}}}},
		}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var refused atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				req := request(uint64(1 + w*each + i))
				for attempt := 0; ; attempt++ {
					_, err := client.Export(ctx, req)
					if err == nil {
						break
					}
					st := status.Convert(err)
					var delay time.Duration
					for _, d := range st.Details() {
						if ri, ok := d.(*errdetails.RetryInfo); ok {
							delay = ri.GetRetryDelay().AsDuration()
						}
					}
					if st.Code() != codes.ResourceExhausted || delay <= 0 {
						t.Errorf("request %d: %v; want OK, or RESOURCE_EXHAUSTED with RetryInfo", 1+w*each+i, err)
						return
					}
					if attempt >= 300 { // bounded: five minutes of the default one-second delay
						t.Errorf("request %d still refused after %d attempts", 1+w*each+i, attempt)
						return
					}
					refused.Add(1)
					time.Sleep(delay)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	testkit.WaitFor(t, "every request at the destination", func() bool {
		dest.mu.Lock()
		defer dest.mu.Unlock()
		return len(dest.ids) == workers*each
	})
	dest.mu.Lock()
	for id, n := range dest.ids {
		if n != 1 || id < 1 || id > workers*each {
			t.Errorf("span %d delivered %d times, want once", id, n)
		}
	}
	if dest.bad != 0 {
		t.Errorf("%d batches did not decode", dest.bad)
	}
	dest.mu.Unlock()
	if n := dials.Load(); n != 1 {
		t.Errorf("the client dialled %d connections, want 1: the connection was closed under its calls", n)
	}
	if n := testutil.ToFloat64(closedConns[closeRecvBytes]) - closedBefore; n != 0 {
		t.Errorf("otlpgate_grpc_closed_connections_total{reason=\"recv_bytes\"} rose by %v, want 0", n)
	}
	t.Logf("%d calls refused with RESOURCE_EXHAUSTED and retried", refused.Load())
}

// The same on OTEP streams: four streams of one connection each send 15 MB messages at once,
// with every bound at its default, through a grpc-go client's generated StreamExporter stubs.
// Every message is answered Success by its id, none by closing the connection under the other
// streams (a stream ended with RESOURCE_EXHAUSTED and RetryInfo is opened again after the
// delay, as a client does; with the default bounds the four fit the connection's share of the
// intake limiter, 64 MiB, and none is).
//
// grpc-go's transport cannot pass it (the subtest is skipped, with the reason): its stream
// reads a message without a reservation (an idle stream would hold one while it waits for its
// next request), and once a handler reads a message grpc-go grants the stream window to the
// message's end, so four 15 MB messages are 56 MB beyond their initial windows, past
// -grpc.max-conn-recv-bytes (32 MiB): the frame watch closes the connection (recv_bytes).
func TestConcurrentLargeStreamMessagesOnOneConnection(t *testing.T) {
	onTransports(t, testConcurrentLargeStreamMessagesOnOneConnection)
}

func testConcurrentLargeStreamMessagesOnOneConnection(t *testing.T, tr string) {
	if tr == TransportGRPCGo && os.Getenv("OTLPGATE_TEST_GRPCGO_LARGE_STREAMS") == "" {
		t.Skip("grpc-go's transport closes the connection under the streams (recv_bytes, see above); OTLPGATE_TEST_GRPCGO_LARGE_STREAMS=1 runs it")
	}
	const (
		streams, each = 4, 2
		bodyBytes     = 15_000_000
	)
	sc := configFor(tr)
	sc.Limiter = admission.NewLimiter(admission.DefaultLimiterConfig())
	pc := testPipelineConfig()
	pc.BatchMaxAge = 5 * time.Millisecond
	dest := &spanCounter{ids: map[uint64]int{}}
	e := startWith(t, pc, sc, nil, dest)

	var dials atomic.Int32
	cc, err := grpc.NewClient(e.srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(sc.MaxRecvMsgSize)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := otepv1.NewStreamExporterClient(cc)
	closedBefore := testutil.ToFloat64(closedConns[closeRecvBytes])

	padding := strings.Repeat("x", bodyBytes)
	request := func(id uint64) *otepv1.TraceExportRequest {
		sid := make([]byte, 8)
		binary.BigEndian.PutUint64(sid, id)
		return &otepv1.TraceExportRequest{Id: id, ResourceSpans: []*tracev1.ResourceSpans{{
			ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
				TraceId: append(make([]byte, 8), sid...), SpanId: sid, Name: "large",
				Attributes: []*commonv1.KeyValue{{Key: "padding",
					Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: padding}}}},
			}}}},
		}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var restarts atomic.Int32
	var wg sync.WaitGroup
	for w := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The ids of this stream not yet answered Success, sent again on a new stream
			// when one ends before answering them.
			pending := map[uint64]bool{}
			for i := range each {
				pending[uint64(1+w*each+i)] = true
			}
			for attempt := 0; len(pending) > 0; attempt++ {
				if attempt >= 300 { // bounded: five minutes of the default one-second delay
					t.Errorf("stream %d: %d requests still unanswered after %d streams", w, len(pending), attempt)
					return
				}
				s, err := client.ExportTraces(ctx)
				if err != nil {
					t.Errorf("stream %d: %v", w, err)
					return
				}
				go func() {
					for id := range pending {
						if s.Send(request(id)) != nil {
							return
						}
					}
					s.CloseSend()
				}()
				var end error
				for {
					resp, err := s.Recv()
					if err != nil {
						end = err
						break
					}
					if !pending[resp.Id] || resp.ResultCode != otepv1.ResultCode_Success {
						t.Errorf("stream %d: answer %v unexpected", w, resp)
						return
					}
					delete(pending, resp.Id)
				}
				if end == io.EOF {
					continue
				}
				st := status.Convert(end)
				if st.Code() != codes.ResourceExhausted || retryDelay(st) <= 0 {
					t.Errorf("stream %d ended with %v; want a clean end, or RESOURCE_EXHAUSTED with RetryInfo", w, end)
					return
				}
				restarts.Add(1)
				time.Sleep(retryDelay(st))
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.Logf("otlpgate_grpc_closed_connections_total{reason=\"recv_bytes\"} rose by %v", testutil.ToFloat64(closedConns[closeRecvBytes])-closedBefore)
		return
	}
	testkit.WaitFor(t, "every request at the destination", func() bool {
		dest.mu.Lock()
		defer dest.mu.Unlock()
		return len(dest.ids) == streams*each
	})
	dest.mu.Lock()
	for id, n := range dest.ids {
		if n != 1 || id < 1 || id > streams*each {
			t.Errorf("span %d delivered %d times, want once", id, n)
		}
	}
	if dest.bad != 0 {
		t.Errorf("%d batches did not decode", dest.bad)
	}
	dest.mu.Unlock()
	if n := dials.Load(); n != 1 {
		t.Errorf("the client dialled %d connections, want 1: the connection was closed under its streams", n)
	}
	if n := testutil.ToFloat64(closedConns[closeRecvBytes]) - closedBefore; n != 0 {
		t.Errorf("otlpgate_grpc_closed_connections_total{reason=\"recv_bytes\"} rose by %v, want 0", n)
	}
	t.Logf("%d streams ended with RESOURCE_EXHAUSTED and opened again", restarts.Load())
}
