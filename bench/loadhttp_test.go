package bench

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	gproto "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// The JSON rendering of a generated batch transcodes to exactly the protobuf encoding of the
// same batch: hex ids, integer enums, decimal-string integers, every attribute.
func TestTraceJSONTranscodesToProtobuf(t *testing.T) {
	for _, sh := range []otlpgen.Shape{{Spans: 1, Attrs: 0}, {Spans: 3, Attrs: 1}, otlpgen.Small, otlpgen.Large} {
		req := otlpgen.New(5).Spans(sh)
		want, err := req.MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		var tr fastpath.JSONTranscoder
		got, sc, err := tr.AppendRequest(nil, fastpath.Traces, AppendTraceJSON(nil, req))
		if err != nil {
			t.Fatalf("%+v: %v", sh, err)
		}
		if !bytes.Equal(got, want) || sc.Items != sh.Spans {
			t.Fatalf("%+v: transcoded %d bytes (%d items), want the %d bytes of MarshalVT (%d items)", sh, len(got), sc.Items, len(want), sh.Spans)
		}
	}
}

// A JSON stamp survives transcoding as the fixed64 stamp the sink reads, for any send time.
func TestStampJSON(t *testing.T) {
	req := otlpgen.New(1).Spans(otlpgen.Shape{Spans: 2, Attrs: 1})
	req.ResourceSpans[0].ScopeSpans[0].Spans[0].StartTimeUnixNano = stampMagic
	b := AppendTraceJSON(nil, req)
	off := StampOffsetJSON(b)
	if off < 0 {
		t.Fatal("no stamp offset")
	}
	var tr fastpath.JSONTranscoder
	for _, now := range []int64{0, 1, 1_700_000_000_123_456_789, int64(stampMask) * 1000, 1<<62 + 12345} {
		StampJSON(b, off, now)
		pb, _, err := tr.AppendRequest(nil, fastpath.Traces, b)
		if err != nil {
			t.Fatalf("now %d: %v (%s)", now, err, b[off-25:off+stampDigits+1])
		}
		want := uint64(now/1000) & stampMask
		if got := stamps(pb); len(got) != 1 || got[0] != want {
			t.Fatalf("now %d: stamps %v, want [%d]", now, got, want)
		}
	}
}

// The HTTP load generator POSTs /v1/traces with the right content type, one stamped body per
// batch, counts 200 as acknowledged, sends a batch again after 503 (after Retry-After when
// given), and fails it on any other answer.
func TestLoadHTTP(t *testing.T) {
	for _, proto := range []string{"http-proto", "http-json"} {
		var mu sync.Mutex
		var bodies [][]byte
		fail := false
		unavailable := 0 // answers of 503 still to give
		srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
			wantCT := "application/x-protobuf"
			if proto == "http-json" {
				wantCT = "application/json"
			}
			if string(ctx.Path()) != "/v1/traces" || !ctx.IsPost() || string(ctx.Request.Header.ContentType()) != wantCT {
				ctx.SetStatusCode(400)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case fail:
				// As otlpgate and the Collector answer: a google.rpc.Status in protobuf.
				b, _ := gproto.Marshal(&spb.Status{Code: 3, Message: "bad \"batch\""})
				ctx.Response.Header.SetContentType("application/x-protobuf")
				ctx.SetStatusCode(400)
				ctx.SetBody(b)
			case unavailable > 0:
				unavailable--
				if unavailable == 0 {
					ctx.Response.Header.Set("Retry-After", "1")
				}
				ctx.SetStatusCode(503)
			default:
				bodies = append(bodies, bytes.Clone(ctx.PostBody()))
			}
		}}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cfg := LoadConfig{Target: ln.Addr().String(), Protocol: proto, Shape: otlpgen.Shape{Spans: 4, Attrs: 2}, Batches: 50, InFlight: 3, Seed: 1}
		res, err := RunLoad(ctx, cfg)
		if err != nil || res.Sent != 50 || res.Acked != 50 || res.Failed != 0 {
			t.Fatalf("%s: %+v, %v", proto, res, err)
		}
		var tr fastpath.JSONTranscoder
		for i, b := range bodies {
			if proto == "http-json" {
				var sc fastpath.Scan
				if b, sc, err = tr.AppendRequest(nil, fastpath.Traces, b); err != nil || sc.Items != 4 {
					t.Fatalf("%s body %d: %d items, %v", proto, i, sc.Items, err)
				}
			}
			if st := stamps(b); len(st) != 1 || st[0] == stampMagic&stampMask {
				t.Fatalf("%s body %d: stamps %v, want one send time", proto, i, st)
			}
		}
		mu.Lock()
		n := len(bodies)
		fail = true
		mu.Unlock()
		if n != 50 {
			t.Fatalf("%s: server got %d bodies, want 50", proto, n)
		}
		cfg.Batches = 5
		res, err = RunLoad(ctx, cfg)
		if err == nil || res.Acked != 0 || res.Failed != 5 || res.Retried != 0 {
			t.Fatalf("%s against 400: %+v, %v", proto, res, err)
		}
		if want := `bench: HTTP 400: "bad \"batch\"" (status code 3)`; err.Error() != want {
			t.Fatalf("%s against 400: error %q, want %q", proto, err, want)
		}
		mu.Lock()
		fail, unavailable, bodies = false, 3, nil
		mu.Unlock()
		cfg.InFlight = 1
		res, err = RunLoad(ctx, cfg)
		mu.Lock()
		n = len(bodies)
		mu.Unlock()
		if err != nil || res.Acked != 5 || res.Failed != 0 || res.Retried != 3 || n != 5 {
			t.Fatalf("%s with three 503 answers: %+v, %v; server kept %d bodies", proto, res, err, n)
		}
		cancel()
		srv.Shutdown()
	}
}

// The gRPC load generator sends a call again after UNAVAILABLE (after RetryInfo's delay) and
// counts the retries; INVALID_ARGUMENT fails the batch.
func TestLoadGRPCRetries(t *testing.T) {
	var mu sync.Mutex
	unavailable, calls := 3, 0
	invalid := false
	gs := grpc.NewServer(grpc.ForceServerCodecV2(codec.New(nil)), grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
		var r codec.Raw
		if err := st.RecvMsg(&r); err != nil {
			return err
		}
		r.Release()
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch {
		case invalid:
			return status.Error(codes.InvalidArgument, "no")
		case unavailable > 0:
			unavailable--
			s, _ := status.New(codes.Unavailable, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Millisecond)})
			return s.Err()
		}
		var empty codec.Raw
		return st.SendMsg(&empty)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := LoadConfig{Target: ln.Addr().String(), Protocol: "v1", Shape: otlpgen.Shape{Spans: 2, Attrs: 1}, Batches: 4, InFlight: 1, Seed: 1}
	res, err := RunLoad(ctx, cfg)
	if err != nil || res.Acked != 4 || res.Failed != 0 || res.Retried != 3 || calls != 7 {
		t.Fatalf("with three UNAVAILABLE answers: %+v, %v, %d calls", res, err, calls)
	}
	mu.Lock()
	invalid = true
	mu.Unlock()
	res, err = RunLoad(ctx, cfg)
	if status.Code(err) != codes.InvalidArgument || res.Acked != 0 || res.Failed != 4 || res.Retried != 0 {
		t.Fatalf("against INVALID_ARGUMENT: %+v, %v", res, err)
	}
}
