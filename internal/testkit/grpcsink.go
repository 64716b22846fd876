package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// SinkRequest is one request as a GRPCSink read it.
type SinkRequest struct {
	Method string // the full gRPC method, "/otlpgate.otep.v1.StreamExporter/ExportTraces"
	Signal fastpath.Signal
	OTEP   bool   // an OTEP request (id at field 1, resource entries at field 2); else a v1 body
	ID     uint64 // the OTEP request id, 0 for v1
	Stream int    // 1-based number of the OTEP stream it came on, 0 for a unary call
	Body   []byte // a copy of the request's bytes, exactly as received
	At     time.Time
	// MD is the call's metadata (for a stream, its opening headers): what a destination's
	// forward-headers and header keys sent.
	MD metadata.MD
}

// GRPCSink is an OTLP upstream on 127.0.0.1: it serves the v1 Export services and the OTEP
// unary and stream exporters of every signal, records each request's exact bytes and the span
// ids of traces, and answers Success (v1: an empty response) unless told to be silent or to
// hold its answers.
type GRPCSink struct {
	addr string
	gs   *grpc.Server
	done chan struct{}
	stop sync.Once

	silent  atomic.Bool
	streams atomic.Int64
	refuse  atomic.Pointer[status.Status]
	refused atomic.Int64

	mu struct {
		sync.Mutex
		reqs  []SinkRequest
		spans map[uint64]int // span id -> deliveries
		order []uint64       // span ids at their first delivery
		dups  int
		gate  chan struct{} // non-nil while answers are held: closed to release them
	}
}

// StartGRPCSink serves on addr ("" for a free port of 127.0.0.1) until the test ends. An addr
// reserved earlier (an upstream that was down until now) may still be held for a moment by the
// kernel: listening is retried, boundedly.
func StartGRPCSink(t testing.TB, addr string) *GRPCSink {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for range 100 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("testkit: gRPC sink cannot listen on %s: %v", addr, err)
	}
	s := &GRPCSink{addr: ln.Addr().String(), done: make(chan struct{})}
	s.mu.spans = map[uint64]int{}
	s.gs = grpc.NewServer(grpc.ForceServerCodecV2(codec.New(nil)), grpc.UnknownServiceHandler(s.handle),
		grpc.MaxRecvMsgSize(64<<20))
	go func() {
		defer close(s.done)
		_ = s.gs.Serve(ln)
	}()
	t.Cleanup(s.Stop)
	return s
}

// Addr is the address the sink listens on, host:port.
func (s *GRPCSink) Addr() string { return s.addr }

// Stop ends every call and connection at once, as a crash of the upstream would, and waits for
// the server to end. Later calls do nothing.
func (s *GRPCSink) Stop() {
	s.stop.Do(func() {
		s.ReleaseAnswers()
		s.gs.Stop()
		<-s.done
	})
}

// SetSilent makes the sink read and record the requests that follow and answer none of them:
// a server hung behind a live connection.
func (s *GRPCSink) SetSilent(on bool) { s.silent.Store(on) }

// SetRefuse makes the sink refuse every request that follows for good, as an upstream that
// cannot read what it is sent does: a v1 or OTEP unary call ends with st, an OTEP stream
// request is answered FailedNoneRetryable (the stream goes on). A refused request is kept in
// Requests, not in the spans delivered. nil accepts again.
func (s *GRPCSink) SetRefuse(st *status.Status) { s.refuse.Store(st) }

// Refused is the number of requests refused (SetRefuse).
func (s *GRPCSink) Refused() int { return int(s.refused.Load()) }

// HoldAnswers makes the sink record the requests that follow and answer each only after
// ReleaseAnswers (or when its call ends).
func (s *GRPCSink) HoldAnswers() {
	s.mu.Lock()
	if s.mu.gate == nil {
		s.mu.gate = make(chan struct{})
	}
	s.mu.Unlock()
}

// ReleaseAnswers answers the held requests and stops holding.
func (s *GRPCSink) ReleaseAnswers() {
	s.mu.Lock()
	if s.mu.gate != nil {
		close(s.mu.gate)
		s.mu.gate = nil
	}
	s.mu.Unlock()
}

// sinkServices and otepMethods map what the sink serves to signals.
var sinkServices = map[string]fastpath.Signal{
	"opentelemetry.proto.collector.trace.v1.TraceService":     fastpath.Traces,
	"opentelemetry.proto.collector.metrics.v1.MetricsService": fastpath.Metrics,
	"opentelemetry.proto.collector.logs.v1.LogsService":       fastpath.Logs,
}

var otepMethods = map[string]fastpath.Signal{
	"ExportTraces":  fastpath.Traces,
	"ExportMetrics": fastpath.Metrics,
	"ExportLogs":    fastpath.Logs,
}

var errUnknownMethod = errors.New("testkit: the gRPC sink does not serve this method")

// handle serves every call: the sink registers no typed service, so that it reads each
// request's bytes as they came.
func (s *GRPCSink) handle(_ any, st grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(st)
	svc, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	var sig fastpath.Signal
	var otep, stream bool
	switch svc {
	case otepv1.UnaryExporter_ServiceDesc.ServiceName, otepv1.StreamExporter_ServiceDesc.ServiceName:
		var ok bool
		if sig, ok = otepMethods[name]; !ok {
			return errUnknownMethod
		}
		otep, stream = true, svc == otepv1.StreamExporter_ServiceDesc.ServiceName
	default:
		var ok bool
		if sig, ok = sinkServices[svc]; !ok || name != "Export" {
			return errUnknownMethod
		}
	}
	n := 0
	if stream {
		n = int(s.streams.Add(1))
	}
	for {
		var in codec.Raw
		err := st.RecvMsg(&in)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		md, _ := metadata.FromIncomingContext(st.Context())
		req := SinkRequest{Method: method, Signal: sig, OTEP: otep, Stream: n, Body: bytes.Clone(in.Bytes()), At: time.Now(), MD: md}
		in.Release()
		if otep {
			req.ID = otepID(req.Body)
		}
		if refusal := s.refuse.Load(); refusal != nil {
			s.mu.Lock()
			s.mu.reqs = append(s.mu.reqs, req)
			s.mu.Unlock()
			s.refused.Add(1)
			if !stream {
				return refusal.Err()
			}
			// ExportResponse{id, FailedNoneRetryable}
			b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), req.ID)
			b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(otepv1.ResultCode_FailedNoneRetryable))
			var out codec.Raw
			out.SetBytes(b)
			if err := st.SendMsg(&out); err != nil {
				return err
			}
			continue
		}
		s.record(req)
		if s.silent.Load() {
			if !stream {
				<-st.Context().Done()
				return st.Context().Err()
			}
			continue
		}
		s.mu.Lock()
		gate := s.mu.gate
		s.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-st.Context().Done():
				return st.Context().Err()
			}
		}
		var out codec.Raw
		if otep {
			// ExportResponse{id, Success}: Success is 0, the default, so the id says it all.
			out.SetBytes(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), req.ID))
		} else {
			out.SetBytes(nil) // an empty Export*ServiceResponse
		}
		if err := st.SendMsg(&out); err != nil {
			return err
		}
		if !stream {
			return nil
		}
	}
}

func (s *GRPCSink) record(req SinkRequest) {
	var ids []uint64
	if req.Signal == fastpath.Traces {
		if req.OTEP {
			var m otepv1.TraceExportRequest
			if m.UnmarshalVT(req.Body) == nil {
				ids = ResourceSpanIDs(m.ResourceSpans)
			}
		} else {
			ids, _ = SpanIDs(req.Body)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.reqs = append(s.mu.reqs, req)
	for _, id := range ids {
		if s.mu.spans[id]++; s.mu.spans[id] == 1 {
			s.mu.order = append(s.mu.order, id)
		} else {
			s.mu.dups++
		}
	}
}

// otepID is field 1 of an OTEP request, 0 when it has none.
func otepID(b []byte) uint64 {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b)
			return v
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0
		}
		b = b[n:]
	}
	return 0
}

// Requests returns every request read so far, in arrival order.
func (s *GRPCSink) Requests() []SinkRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SinkRequest(nil), s.mu.reqs...)
}

// Streams returns how many OTEP streams were opened to the sink.
func (s *GRPCSink) Streams() int { return int(s.streams.Load()) }

// Spans returns how many times each span id arrived.
func (s *GRPCSink) Spans() map[uint64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[uint64]int, len(s.mu.spans))
	for id, n := range s.mu.spans {
		out[id] = n
	}
	return out
}

// FirstArrivals returns the span ids in the order of their first arrival.
func (s *GRPCSink) FirstArrivals() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.mu.order...)
}

// SpanCount returns how many spans arrived, duplicates included, and how many of them were
// duplicates.
func (s *GRPCSink) SpanCount() (total, dups int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.order) + s.mu.dups, s.mu.dups
}

// Fewer returns how many of ids arrived fewer than n times.
func (s *GRPCSink) Fewer(ids []uint64, n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	short := 0
	for _, id := range ids {
		if s.mu.spans[id] < n {
			short++
		}
	}
	return short
}

// WaitSpans waits until every one of ids arrived, at most WaitTimeout, and returns how many
// did not: the caller fails the test with what it knows of the reason.
func (s *GRPCSink) WaitSpans(ids []uint64) (missing int) {
	deadline := time.Now().Add(WaitTimeout)
	for {
		if missing = s.Fewer(ids, 1); missing == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// String describes what the sink received, for failure messages.
func (s *GRPCSink) String() string {
	total, dups := s.SpanCount()
	return fmt.Sprintf("gRPC sink %s: %d requests, %d streams, %d spans (%d duplicates)", s.addr, len(s.Requests()), s.Streams(), total, dups)
}
