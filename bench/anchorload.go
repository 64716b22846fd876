package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// exportMethod is OTLP/gRPC's trace Export call.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// anchorBodies are the anchor load's requests in one compression, built and compressed once:
// compressing 80 MB/s on the load's side would take the core that the load and the sink share.
// The bodies carry no send time stamp (a stamp changes the bytes of each send): the anchor
// measures CPU, not latency.
type anchorBodies struct {
	compression string // "none", "gzip" or "zstd"
	grpc        []*grpc.PreparedMsg
	http        [][]byte
	wire        int // bytes of a request body on the wire, on average
}

// buildBodies marshals n batches of shape and prepares them for both intakes in compression.
// gRPC messages are framed and compressed by grpc-go itself (PreparedMsg), through a stream
// opened on sink for that purpose and cancelled before it sends anything: what it compressed
// is the same whatever the connection.
func buildBodies(ctx context.Context, shape otlpgen.Shape, n int, compression, sink string) (*anchorBodies, int, error) {
	g := otlpgen.New(11)
	ab := &anchorBodies{compression: compression}
	var raw [][]byte
	total := 0
	for range n {
		b, err := g.Spans(shape).MarshalVT()
		if err != nil {
			return nil, 0, err
		}
		raw = append(raw, b)
		total += len(b)
	}
	opts := []grpc.CallOption{}
	if compression != "none" {
		opts = append(opts, grpc.UseCompressor(compression))
	}
	conn, err := anchorConn(sink)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := conn.NewStream(sctx, &grpc.StreamDesc{}, exportMethod, opts...)
	if err != nil {
		return nil, 0, err
	}
	wire := 0
	for _, b := range raw {
		var r codec.Raw
		r.SetBytes(b)
		pm := new(grpc.PreparedMsg)
		if err := pm.Encode(st, &r); err != nil {
			return nil, 0, fmt.Errorf("bench: cannot prepare a %s gRPC message: %w", compression, err)
		}
		ab.grpc = append(ab.grpc, pm)
		hb, err := compressBody(b, compression)
		if err != nil {
			return nil, 0, err
		}
		ab.http = append(ab.http, hb)
		wire += len(hb)
	}
	ab.wire = wire / n
	return ab, total / n, nil
}

// compressBody compresses an OTLP/HTTP body as Content-Encoding compression says, at the
// compressors' default levels.
func compressBody(b []byte, compression string) ([]byte, error) {
	var buf bytes.Buffer
	switch compression {
	case "none":
		return b, nil
	case "gzip":
		w := gzip.NewWriter(&buf)
		w.Write(b)
		if err := w.Close(); err != nil {
			return nil, err
		}
	case "zstd":
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			return nil, err
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("bench: unknown compression %q", compression)
	}
	return buf.Bytes(), nil
}

// anchorConn is a gRPC connection as the load uses it: the raw codec, windows large enough that
// flow control never holds a batch back.
func anchorConn(target string) (*grpc.ClientConn, error) {
	return grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil)), grpc.MaxCallSendMsgSize(64<<20)),
		grpc.WithInitialWindowSize(4<<20), grpc.WithInitialConnWindowSize(16<<20))
}

// openLoadResult is what an open-loop run did.
type openLoadResult struct {
	Sent, Acked, Failed int
	// Late counts the sends that found maxInFlight requests unanswered when they were due and
	// waited: the target fell behind the rate, and the loop was no longer open.
	Late     int
	FirstErr error
	// Latencies are the answered requests' times from when each was due (when the loop found
	// it sent, without a rate) to its answer, sorted: what a client observes, the wait for a
	// slot included.
	Latencies []time.Duration
	Wall      time.Duration // from the first send to the last answer
}

// runOpenLoad sends n requests to target over intake ("grpc" or "http"), the i-th at i/rate
// seconds after the start whatever the answers to the ones before (an open loop), with at most
// maxInFlight unanswered. A rate of 0 sends each as soon as a slot is free (a closed loop of
// maxInFlight). A positive until also ends the sending that long after the start. It returns
// when every request sent is answered.
func runOpenLoad(ctx context.Context, target, intake string, bodies *anchorBodies, n int, rate float64, maxInFlight int, until time.Duration) (openLoadResult, error) {
	var send func(i int) error
	switch intake {
	case "grpc":
		conn, err := anchorConn(target)
		if err != nil {
			return openLoadResult{}, err
		}
		defer conn.Close()
		var opts []grpc.CallOption
		if bodies.compression != "none" {
			opts = append(opts, grpc.UseCompressor(bodies.compression))
		}
		send = func(i int) error {
			var resp coltracev1.ExportTraceServiceResponse
			return conn.Invoke(ctx, exportMethod, bodies.grpc[i%len(bodies.grpc)], &resp, opts...)
		}
	case "http":
		hc := &fasthttp.HostClient{
			Addr:                     target,
			MaxConns:                 maxInFlight,
			MaxResponseBodySize:      64 << 10,
			ReadTimeout:              time.Minute,
			WriteTimeout:             time.Minute,
			NoDefaultUserAgentHeader: true,
		}
		defer hc.CloseIdleConnections()
		uri := "http://" + target + "/v1/traces"
		send = func(i int) error {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(uri)
			req.Header.SetMethod(fasthttp.MethodPost)
			req.Header.SetContentType("application/x-protobuf")
			if bodies.compression != "none" {
				req.Header.Set(fasthttp.HeaderContentEncoding, bodies.compression)
			}
			req.SetBodyRaw(bodies.http[i%len(bodies.http)])
			if err := hc.Do(req, resp); err != nil {
				return err
			}
			if resp.StatusCode() != fasthttp.StatusOK {
				return fmt.Errorf("bench: HTTP %d: %.200s", resp.StatusCode(), resp.Body())
			}
			return nil
		}
	default:
		return openLoadResult{}, fmt.Errorf("bench: unknown intake %q", intake)
	}

	var res openLoadResult
	var acked, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	var lat struct {
		sync.Mutex
		d []time.Duration
	}
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if until > 0 && time.Since(start) >= until {
			break
		}
		due := time.Now()
		if rate > 0 {
			due = start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case slots <- struct{}{}:
		default:
			if rate > 0 {
				res.Late++
			}
			slots <- struct{}{}
		}
		res.Sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := send(i); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
				return
			}
			d := time.Since(due)
			acked.Add(1)
			lat.Lock()
			lat.d = append(lat.d, d)
			lat.Unlock()
		}()
	}
	wg.Wait()
	res.Wall = time.Since(start)
	res.Acked, res.Failed = int(acked.Load()), int(failed.Load())
	if e := firstErr.Load(); e != nil {
		res.FirstErr = *e
	}
	slices.Sort(lat.d)
	res.Latencies = lat.d
	return res, ctx.Err()
}
