package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/strictsink"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// oneSpan is an Export request of one span with the given ids, numbered by name.
func oneSpan(traceID, spanID []byte, n int) []byte {
	b, err := (&coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{
		Spans: []*tracev1.Span{{TraceId: traceID, SpanId: spanID, Name: fmt.Sprint("span ", n)}},
	}}}}}).MarshalVT()
	if err != nil {
		panic(err) // a message of set fields always marshals
	}
	return b
}

// jsonSpan is the OTLP/JSON form of oneSpan.
func jsonSpan(traceID, spanID []byte, n int) []byte {
	return fmt.Appendf(nil, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":%q,"spanId":%q,"name":"span %d"}]}]}]}`,
		hex.EncodeToString(traceID), hex.EncodeToString(spanID), n)
}

func post(ctx context.Context, url, contentType string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// The otlpgate binary with its default scan depth forwards to an upstream that validates as the
// OpenTelemetry Collector does (strictsink: pdata's decoder, over OTLP/gRPC v1). One client
// sends well-formed spans over OTLP/HTTP, protobuf and JSON; another, at the same time, sends
// spans with an 8-byte trace id or a 16-byte span id over OTLP/HTTP (protobuf and JSON) and
// gRPC. Batches are slow to seal, so the requests share them. Every bad request is refused on
// its own (400, INVALID_ARGUMENT), every good one answered 200; after a clean stop (exit
// status 0) the upstream has refused nothing and received every good span exactly once.
func TestBinaryMalformedIDsRefusedPerRequest(t *testing.T) {
	sink, err := strictsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)
	bin := buildBinary(t)
	g := startGateway(t, bin, "-batch.eager=false", "-batch.max-age", "100ms",
		"-dest", "name=strict,endpoint="+sink.Addr()+",protocol=v1,mode=unary,insecure=true")
	httpAddr := g.http
	// Ready once its intakes listen: on a busy machine the first answer may still be 503.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		code, body := readyz(t, g.admin)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q after a minute", code, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "http://" + httpAddr + "/v1/traces"
	traceID := []byte("0123456789abcdef")
	spanID := func(n int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

	const good, bad = 100, 10
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // the well-behaved client: odd spans as protobuf, even ones as JSON
		defer wg.Done()
		for n := 1; n <= good; n++ {
			ct, body := "application/x-protobuf", oneSpan(traceID, spanID(n), n)
			if n%2 == 0 {
				ct, body = "application/json", jsonSpan(traceID, spanID(n), n)
			}
			if code, msg, err := post(ctx, url, ct, body); err != nil || code != http.StatusOK {
				errs <- fmt.Errorf("good span %d (%s): %d %s %v", n, ct, code, msg, err)
				return
			}
		}
		errs <- nil
	}()
	go func() { // the other client
		defer wg.Done()
		conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil))))
		if err != nil {
			errs <- err
			return
		}
		defer conn.Close()
		for n := range bad {
			tid, sid := traceID[:8], spanID(1000+n) // a trace id of a span id's size
			if n%2 == 1 {
				tid, sid = traceID, traceID // a span id of a trace id's size
			}
			if code, msg, err := post(ctx, url, "application/x-protobuf", oneSpan(tid, sid, -n)); err != nil || code != http.StatusBadRequest {
				errs <- fmt.Errorf("bad protobuf %d: %d %s %v, want 400", n, code, msg, err)
				return
			}
			if code, msg, err := post(ctx, url, "application/json", jsonSpan(tid, sid, -n)); err != nil || code != http.StatusBadRequest ||
				!strings.Contains(msg, "trace id not 0 or 16 bytes") {
				errs <- fmt.Errorf("bad JSON %d: %d %s %v, want 400 naming the id", n, code, msg, err)
				return
			}
			var req, resp codec.Raw
			req.SetBytes(oneSpan(tid, sid, -n))
			err := conn.Invoke(ctx, coltracev1.TraceService_Export_FullMethodName, &req, &resp)
			resp.Release()
			if status.Code(err) != codes.InvalidArgument {
				errs <- fmt.Errorf("bad gRPC %d: %v, want INVALID_ARGUMENT", n, err)
				return
			}
		}
		errs <- nil
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	g.terminate(t) // a clean stop delivers what was acknowledged
	if g.exitErr != nil {
		t.Fatalf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
	if n := sink.Refused(fastpath.Traces); n != 0 {
		t.Fatalf("the upstream refused %d batches: %v", n, sink.LastError())
	}
	spans := sink.Spans()
	for n := 1; n <= good; n++ {
		if c := spans[pcommon.SpanID(spanID(n))]; c != 1 {
			t.Fatalf("span %d arrived %d times, want once (%d spans arrived)", n, c, len(spans))
		}
	}
	if len(spans) != good {
		t.Fatalf("%d distinct spans arrived, want %d", len(spans), good)
	}
}
