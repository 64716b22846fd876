package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// LoadConfig is one load run.
type LoadConfig struct {
	Target string // host:port of the receiver
	// Protocol is "v1" (gRPC TraceService/Export, unary), "otep" (gRPC StreamExporter,
	// pipelined), "http-proto" or "http-json" (OTLP/HTTP POST /v1/traces, keep-alive, one
	// request in flight per connection).
	Protocol string
	Shape    otlpgen.Shape // spans and attributes per batch
	Batches  int           // batches to send
	InFlight int           // requests awaiting an answer at once (workers for v1, window for otep)
	Rate     float64       // batches per second; 0 is a closed loop (send as fast as answers allow)
	Seed     uint64
	// Header, when not empty, is sent with every request (gRPC metadata, an HTTP header): worker
	// w (of InFlight) sends HeaderValues[w%len(HeaderValues)], so that a proxy reading it as a
	// tenant (otlpgate's -intake.headers) sees that many tenants, interleaved. The pipelined
	// OTEP load has one stream and sends the first value.
	Header       string
	HeaderValues []string
	// Conns, when set, keeps the load's connections from one RunLoad to the next: a warm-up
	// dials, the measured phase reuses its connections, and what a receiver spends on a new
	// connection stays out of the phase. The caller closes it.
	Conns *LoadConns
}

// LoadConns holds the connections RunLoad dialled for a LoadConfig with Conns set. Not safe
// for concurrent RunLoad calls.
type LoadConns struct {
	grpc *grpc.ClientConn
	http *fasthttp.HostClient
}

// Close closes the connections.
func (c *LoadConns) Close() {
	if c.grpc != nil {
		c.grpc.Close()
	}
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
}

// headerValue is the value worker w sends in Header, "" when there is no header.
func (cfg LoadConfig) headerValue(w int) string {
	if cfg.Header == "" || len(cfg.HeaderValues) == 0 {
		return ""
	}
	return cfg.HeaderValues[w%len(cfg.HeaderValues)]
}

// workerContext is ctx with worker w's header in its outgoing metadata.
func (cfg LoadConfig) workerContext(ctx context.Context, w int) context.Context {
	if v := cfg.headerValue(w); v != "" {
		return metadata.AppendToOutgoingContext(ctx, cfg.Header, v)
	}
	return ctx
}

// LoadResult is what a run did.
type LoadResult struct {
	Sent, Acked, Failed int
	// Retried counts the sends the receiver answered as retryable (OTLP/HTTP 429, 502, 503,
	// 504; gRPC UNAVAILABLE, RESOURCE_EXHAUSTED on unary calls) and that were sent again.
	Retried int
	Wall    time.Duration
}

// template is a pre-built request with the offset of its time stamp.
type template struct {
	b    []byte
	off  int
	json bool // the stamp is decimal text (StampJSON), not a fixed64 (Stamp)
}

// stamp writes the send time into t.
func (t template) stamp(nowNanos int64) {
	if t.json {
		StampJSON(t.b, t.off, nowNanos)
	} else {
		Stamp(t.b, t.off, nowNanos)
	}
}

// templates builds n distinct batches (so that the receiver does not see one repeated payload)
// in the wire layout of protocol.
func templates(cfg LoadConfig, n int) ([]template, error) {
	g := otlpgen.New(cfg.Seed)
	out := make([]template, n)
	for i := range out {
		req := g.Spans(cfg.Shape)
		if cfg.Protocol == "http-json" {
			// Rendered once per template; only the stamp digits change per send.
			req.ResourceSpans[0].ScopeSpans[0].Spans[0].StartTimeUnixNano = stampMagic
			b := AppendTraceJSON(nil, req)
			off := StampOffsetJSON(b)
			if off < 0 {
				return nil, errors.New("bench: no span start time to stamp in the JSON batch")
			}
			out[i] = template{b, off, true}
			continue
		}
		start := req.ResourceSpans[0].ScopeSpans[0].Spans[0].StartTimeUnixNano
		b, err := req.MarshalVT()
		if err != nil {
			return nil, err
		}
		if cfg.Protocol == "otep" {
			if b, err = fastpath.AppendOTEP(nil, 1, b); err != nil {
				return nil, err
			}
		}
		off := StampOffset(b, start)
		if off < 0 {
			return nil, errors.New("bench: no span start time to stamp")
		}
		out[i] = template{b: b, off: off}
	}
	return out, nil
}

// RunLoad sends cfg.Batches batches to cfg.Target and waits for their answers.
func RunLoad(ctx context.Context, cfg LoadConfig) (LoadResult, error) {
	if cfg.InFlight <= 0 || cfg.Batches <= 0 {
		return LoadResult{}, errors.New("bench: in-flight and batches must be positive")
	}
	tmpl, err := templates(cfg, min(cfg.Batches, 16))
	if err != nil {
		return LoadResult{}, err
	}
	var pace <-chan time.Time
	if cfg.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
		defer t.Stop()
		pace = t.C
	}
	if cfg.Protocol == "http-proto" || cfg.Protocol == "http-json" {
		start := time.Now()
		res, err := loadHTTP(ctx, cfg, tmpl, pace)
		res.Wall = time.Since(start)
		return res, err
	}
	var conn *grpc.ClientConn
	if cfg.Conns != nil {
		conn = cfg.Conns.grpc
	}
	if conn == nil {
		var err error
		conn, err = grpc.NewClient(cfg.Target, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil)), grpc.MaxCallSendMsgSize(64<<20)),
			grpc.WithInitialWindowSize(4<<20), grpc.WithInitialConnWindowSize(16<<20))
		if err != nil {
			return LoadResult{}, err
		}
		if cfg.Conns != nil {
			cfg.Conns.grpc = conn
		} else {
			defer conn.Close()
		}
	}
	start := time.Now()
	var res LoadResult
	switch cfg.Protocol {
	case "v1":
		res, err = loadUnary(ctx, conn, cfg, tmpl, pace)
	case "otep":
		res, err = loadStream(ctx, conn, cfg, tmpl, pace)
	default:
		return LoadResult{}, fmt.Errorf("bench: unknown protocol %q", cfg.Protocol)
	}
	res.Wall = time.Since(start)
	return res, err
}

func loadUnary(ctx context.Context, conn *grpc.ClientConn, cfg LoadConfig, tmpl []template, pace <-chan time.Time) (LoadResult, error) {
	var next, acked, failed, retried atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for w := range cfg.InFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker stamps its own copy: a request's bytes must not change while in flight.
			own := make([]template, len(tmpl))
			for i, t := range tmpl {
				own[i] = template{append([]byte(nil), t.b...), t.off, t.json}
			}
			ctx := cfg.workerContext(ctx, w)
			var r codec.Raw
			resp := new(coltracev1.ExportTraceServiceResponse)
			for {
				i := next.Add(1) - 1
				if i >= int64(cfg.Batches) {
					return
				}
				if pace != nil {
					select {
					case <-pace:
					case <-ctx.Done():
						return
					}
				}
				t := own[i%int64(len(own))]
				t.stamp(time.Now().UnixNano())
				r.SetBytes(t.b)
				err := conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &r, resp)
				// UNAVAILABLE and RESOURCE_EXHAUSTED are retried as OTLP/gRPC exporters retry
				// them, after RetryInfo's delay when given, as on OTLP/HTTP (loadhttp.go).
				for backoff, n := 5*time.Millisecond, 0; retryableGRPC(err) && n < maxHTTPRetries; n++ {
					d := backoff
					if ri := retryDelay(err); ri > 0 {
						d = ri
					}
					backoff = min(2*backoff, time.Second)
					retried.Add(1)
					select {
					case <-time.After(d):
					case <-ctx.Done():
						return
					}
					r.SetBytes(t.b)
					err = conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &r, resp)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				acked.Add(1)
			}
		}()
	}
	wg.Wait()
	res := LoadResult{Sent: cfg.Batches, Acked: int(acked.Load()), Failed: int(failed.Load()), Retried: int(retried.Load())}
	if e := firstErr.Load(); e != nil {
		return res, *e
	}
	return res, ctx.Err()
}

func loadStream(ctx context.Context, conn *grpc.ClientConn, cfg LoadConfig, tmpl []template, pace <-chan time.Time) (LoadResult, error) {
	ctx, cancel := context.WithCancel(cfg.workerContext(ctx, 0))
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		"/otlpgate.otep.v1.StreamExporter/ExportTraces")
	if err != nil {
		return LoadResult{}, err
	}
	// One buffer per window slot: slot k is reused only after its previous request was answered.
	slots := make([][]byte, cfg.InFlight)
	window := make(chan int, cfg.InFlight)
	for k := range slots {
		window <- k
	}
	inflight := make(map[uint64]int, cfg.InFlight)
	var mu sync.Mutex
	var res LoadResult
	recvDone := make(chan error, 1)
	go func() {
		resp := new(otepv1.ExportResponse)
		for n := 0; n < cfg.Batches; n++ {
			if err := st.RecvMsg(resp); err != nil {
				recvDone <- err
				return
			}
			mu.Lock()
			k, ok := inflight[resp.Id]
			delete(inflight, resp.Id)
			if resp.ResultCode == otepv1.ResultCode_Success {
				res.Acked++
			} else {
				res.Failed++
			}
			mu.Unlock()
			if ok {
				window <- k
			}
		}
		recvDone <- nil
	}()
	var r codec.Raw
	for id := uint64(1); id <= uint64(cfg.Batches); id++ {
		var k int
		select {
		case k = <-window:
		case err := <-recvDone:
			return res, fmt.Errorf("bench: stream ended early: %w", err)
		}
		if pace != nil {
			<-pace
		}
		t := tmpl[int(id)%len(tmpl)]
		slots[k] = otepWithID(slots[k][:0], t.b, id)
		off := t.off + (len(slots[k]) - len(t.b))
		mu.Lock()
		inflight[id] = k
		mu.Unlock()
		Stamp(slots[k], off, time.Now().UnixNano())
		r.SetBytes(slots[k])
		if err := st.SendMsg(&r); err != nil {
			return res, err
		}
		res.Sent++
	}
	st.CloseSend()
	err = <-recvDone
	return res, err
}

// otepWithID copies an OTEP template (built with id 1) with its id replaced.
func otepWithID(dst, tmpl []byte, id uint64) []byte {
	// The template starts with field 1 = 1: tag 0x08, varint 0x01.
	dst = append(dst, 0x08)
	for id >= 0x80 {
		dst = append(dst, byte(id)|0x80)
		id >>= 7
	}
	dst = append(dst, byte(id))
	return append(dst, tmpl[2:]...)
}

// retryableGRPC reports the unary call errors OTLP/gRPC exporters retry.
func retryableGRPC(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted:
		return true
	}
	return false
}

// retryDelay is the RetryInfo delay of err, 0 when it has none.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}
