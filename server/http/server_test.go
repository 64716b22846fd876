package httpserver

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	spb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// traces returns an encoded trace export request of n spans (one resource).
func traces(t testing.TB, seed uint64, n int) []byte {
	t.Helper()
	b, err := otlpgen.New(seed).Spans(otlpgen.Shape{Spans: n, Attrs: 2}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// badSpanEntry is a resource entry whose top level and scope hold together but whose one span
// starts with field number 0: a full scan refuses it, a resource-depth scan counts one span.
var badSpanEntry = []byte{0x0a, 0x05, 0x12, 0x03, 0x12, 0x01, 0x07}

func wantStatus(t *testing.T, r response, httpStatus int, code codes.Code, msg string) {
	t.Helper()
	if r.status != httpStatus {
		t.Fatalf("status %d, want %d (body %q)", r.status, httpStatus, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != ctProto {
		t.Errorf("Content-Type %q, want %q", ct, ctProto)
	}
	st := status(t, r.body)
	if codes.Code(st.Code) != code || st.Message != msg {
		t.Errorf("status {%v %q}, want {%v %q}", codes.Code(st.Code), st.Message, code, msg)
	}
}

func wantNothingReceived(t *testing.T, e *env) {
	t.Helper()
	e.p.Flush()
	if got, items := e.rec.Payload(); len(got) != 0 || items != 0 {
		t.Errorf("destination got %d bytes, %d items; want nothing", len(got), items)
	}
}

// Every answer of the intake to a well-addressed request, with its exact body, and what reached
// the destination.
func TestStatusCodes(t *testing.T) {
	req := traces(t, 1, 3)
	notFoundMsg := "unknown path: OTLP/HTTP takes POST /v1/traces, /v1/metrics and /v1/logs"

	t.Run("200 empty request", func(t *testing.T) {
		e := start(t, testPipelineConfig(), DefaultConfig(), nil)
		r := e.post(t, "/v1/traces", nil)
		if r.status != 200 || len(r.body) != 0 || r.header.Get("Content-Type") != ctProto {
			t.Fatalf("got %d %q %q", r.status, r.header.Get("Content-Type"), r.body)
		}
		wantNothingReceived(t, e)
	})
	for _, enc := range []string{"", "identity", "gzip", "GZIP", "zstd"} {
		t.Run("200 "+enc, func(t *testing.T) {
			e := start(t, testPipelineConfig(), DefaultConfig(), nil)
			body := req
			switch strings.ToLower(enc) {
			case "gzip":
				body = gzipped(t, req)
			case "zstd":
				body = zstded(t, req)
			}
			r := e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": "application/x-protobuf; charset=utf-8", "Content-Encoding": enc}, body)
			if r.status != 200 || len(r.body) != 0 {
				t.Fatalf("got %d %q", r.status, r.body)
			}
			e.p.Flush()
			if got, items := e.rec.Payload(); !bytes.Equal(got, req) || items != 3 {
				t.Errorf("destination got %d bytes, %d items; want the request's %d bytes, 3 items", len(got), items, len(req))
			}
		})
	}
	t.Run("200 partial_success", func(t *testing.T) {
		e := start(t, testPipelineConfig(), DefaultConfig(), nil)
		body := append(append(append([]byte{}, badSpanEntry...), req...), 0x78, 0x01) // bad entry, good one, unknown field 15
		r := e.post(t, "/v1/metrics", nil)                                            // metrics path unused: a sanity 200
		if r.status != 200 {
			t.Fatalf("empty metrics: %d", r.status)
		}
		r = e.post(t, "/v1/traces", body)
		if r.status != 200 {
			t.Fatalf("status %d %q", r.status, r.body)
		}
		resp := &coltracev1.ExportTraceServiceResponse{}
		if err := resp.UnmarshalVT(r.body); err != nil {
			t.Fatal(err)
		}
		ps := resp.GetPartialSuccess()
		if ps.GetRejectedSpans() != 1 || ps.GetErrorMessage() != "1 of 2 resource entries were malformed and dropped" {
			t.Errorf("partial success %v", ps)
		}
		e.p.Flush()
		if got, items := e.rec.Payload(); !bytes.Equal(got, req) || items != 3 {
			t.Errorf("destination got %x (%d items), want the good entry only", got, items)
		}
	})
	t.Run("400 malformed", func(t *testing.T) {
		e := start(t, testPipelineConfig(), DefaultConfig(), nil)
		wantStatus(t, e.post(t, "/v1/traces", req[:len(req)-1]), 400, codes.InvalidArgument, "malformed OTLP request")
		wantStatus(t, e.post(t, "/v1/logs", badSpanEntry), 400, codes.InvalidArgument, "malformed OTLP request")
		wantNothingReceived(t, e)
	})
	t.Run("400 malformed at resource depth", func(t *testing.T) {
		sc := DefaultConfig()
		sc.ScanDepth = fastpath.DepthResource
		e := start(t, testPipelineConfig(), sc, nil)
		wantStatus(t, e.post(t, "/v1/traces", append(append([]byte{}, req...), 0x0a, 0x02, 0x12, 0x05)), 400, codes.InvalidArgument, "malformed OTLP request")
		wantNothingReceived(t, e)
	})
	t.Run("400 corrupt gzip", func(t *testing.T) {
		e := start(t, testPipelineConfig(), DefaultConfig(), nil)
		z := gzipped(t, req)
		z[len(z)/2] ^= 0xff
		wantStatus(t, e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Content-Encoding": "gzip"}, z),
			400, codes.InvalidArgument, "cannot decompress the request body")
		wantStatus(t, e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Content-Encoding": "zstd"}, []byte("not zstd")),
			400, codes.InvalidArgument, "cannot decompress the request body")
		wantNothingReceived(t, e)
	})
	t.Run("404", func(t *testing.T) {
		e := start(t, testPipelineConfig(), DefaultConfig(), nil)
		for _, p := range []string{"/", "/v1/trace", "/v1/traces/x", "/v2/logs"} {
			wantStatus(t, e.post(t, p, req), 404, codes.NotFound, notFoundMsg)
		}
		wantNothingReceived(t, e)
	})
	t.Run("404 configured paths", func(t *testing.T) {
		sc := DefaultConfig()
		sc.TracesPath = "/otlp/t"
		e := start(t, testPipelineConfig(), sc, nil)
		wantStatus(t, e.post(t, "/v1/traces", req), 404, codes.NotFound, "unknown path: OTLP/HTTP takes POST /otlp/t, /v1/metrics and /v1/logs")
		if r := e.post(t, "/otlp/t", req); r.status != 200 {
			t.Errorf("configured path: %d", r.status)
		}
	})
	t.Run("405", func(t *testing.T) {
		e := start(t, testPipelineConfig(), DefaultConfig(), nil)
		for _, m := range []string{"GET", "PUT", "DELETE", "OPTIONS", "PATCH"} {
			r := e.do(t, m, "/v1/traces", map[string]string{"Content-Type": ctProto}, nil)
			wantStatus(t, r, 405, codes.Unimplemented, "method not allowed: OTLP/HTTP takes POST")
			if a := r.header.Get("Allow"); a != "POST" {
				t.Errorf("%s: Allow %q", m, a)
			}
		}
	})
	t.Run("415", func(t *testing.T) {
		e := start(t, testPipelineConfig(), DefaultConfig(), nil)
		for _, ct := range []string{"", "text/plain", "application/protobuf", "application/grpc", "application/x-protobuffer"} {
			wantStatus(t, e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ct}, req),
				415, codes.InvalidArgument, "unsupported Content-Type: use application/x-protobuf or application/json")
		}
		for _, ce := range []string{"br", "deflate", "gzip, zstd", "snappy"} {
			r := e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Content-Encoding": ce}, req)
			wantStatus(t, r, 415, codes.InvalidArgument, "unsupported Content-Encoding: use gzip, zstd or identity")
			if a := r.header.Get("Accept-Encoding"); a != "gzip, zstd, identity" {
				t.Errorf("Accept-Encoding %q", a)
			}
		}
		wantNothingReceived(t, e)
	})
	t.Run("413", func(t *testing.T) {
		sc := DefaultConfig()
		sc.MaxRequestBytes = len(req) + 10
		e := start(t, testPipelineConfig(), sc, nil)
		msg := "request body larger than " + itoa(sc.MaxRequestBytes) + " bytes (-http.max-request-bytes), compressed or not"
		big := append(append([]byte{}, req...), traces(t, 2, 3)...)
		wantStatus(t, e.post(t, "/v1/traces", big), 413, codes.InvalidArgument, msg) // Content-Length
		// The same, compressed below the limit: refused once inflated past it.
		for _, enc := range []string{"gzip", "zstd"} {
			z := gzipped(t, big)
			if enc == "zstd" {
				z = zstded(t, big)
			}
			if len(z) > sc.MaxRequestBytes {
				t.Fatalf("compressed test body too large: %d", len(z))
			}
			wantStatus(t, e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Content-Encoding": enc}, z), 413, codes.InvalidArgument, msg)
		}
		// Exactly at the limit, inflated: accepted.
		exact := append(append([]byte{}, req...), make([]byte, sc.MaxRequestBytes-len(req))...)
		exact[len(req)], exact[len(req)+1] = 0x7a, byte(sc.MaxRequestBytes-len(req)-2) // unknown field 15, bytes
		if r := e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Content-Encoding": "gzip"}, gzipped(t, exact)); r.status != 200 {
			t.Errorf("body at the limit: %d %q", r.status, r.body)
		}
		e.p.Flush()
		if _, items := e.rec.Payload(); items != 3 {
			t.Errorf("destination got %d items, want 3", items)
		}
	})
	t.Run("413 larger than the queue", func(t *testing.T) {
		pc := testPipelineConfig()
		pc.QueueMaxBytes, pc.BatchMaxBytes = int64(len(req)-1), len(req)-1
		e := start(t, pc, DefaultConfig(), nil)
		wantStatus(t, e.post(t, "/v1/traces", req), 413, codes.ResourceExhausted, "request larger than the whole queue (-queue.max-bytes)")
	})
	t.Run("429 then 503 with Retry-After", func(t *testing.T) {
		for _, tc := range []struct {
			after  time.Duration
			status int
			code   codes.Code
		}{{time.Hour, 429, codes.ResourceExhausted}, {0, 503, codes.Unavailable}} {
			pc := testPipelineConfig()
			pc.QueueMaxBytes, pc.BatchMaxBytes = int64(len(req)), len(req)
			sc := DefaultConfig()
			sc.OverloadAfter = tc.after
			e := start(t, pc, sc, testkit.NewHoldingRecorder("recorder"))
			if r := e.post(t, "/v1/traces", req); r.status != 200 {
				t.Fatalf("first request: %d", r.status)
			}
			r := e.post(t, "/v1/traces", req)
			wantStatus(t, r, tc.status, tc.code, "otlpgate is overloaded: retry after the given delay")
			// No drain measured yet: RetryDelay's 5s default.
			if ra := r.header.Get("Retry-After"); ra != "5" {
				t.Errorf("Retry-After %q, want 5", ra)
			}
		}
	})
	t.Run("503 shutting down", func(t *testing.T) {
		e := start(t, testPipelineConfig(), DefaultConfig(), nil)
		e.p.Close()
		wantStatus(t, e.post(t, "/v1/traces", req), 503, codes.Unavailable, "otlpgate is shutting down")
	})
	t.Run("401", func(t *testing.T) {
		sc := DefaultConfig()
		sc.AuthTokenFile = filepath.Join(t.TempDir(), "token")
		os.WriteFile(sc.AuthTokenFile, []byte("s3cret\n"), 0o600)
		e := start(t, testPipelineConfig(), sc, nil)
		for _, auth := range []string{"", "Bearer wrong", "s3cret", "Bearer s3cret2", "bearer  s3cret"} {
			r := e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Authorization": auth}, req)
			wantStatus(t, r, 401, codes.Unauthenticated, "missing or wrong bearer token")
			if w := r.header.Get("WWW-Authenticate"); w != "Bearer" {
				t.Errorf("WWW-Authenticate %q", w)
			}
		}
		wantNothingReceived(t, e)
		if r := e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "Authorization": "Bearer s3cret"}, req); r.status != 200 {
			t.Errorf("right token: %d", r.status)
		}
	})
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// With -ack=upstream the answer waits for the destination: 200 once it delivered, 503 with
// Retry-After when it gave the batch up.
func TestAckUpstream(t *testing.T) {
	req := traces(t, 1, 3)
	pc := testPipelineConfig()
	pc.Ack = pipeline.AckUpstream
	pc.Eager = true
	rec := testkit.NewHoldingRecorder("recorder")
	e := start(t, pc, DefaultConfig(), rec)
	done := make(chan response, 1)
	go func() {
		r, err := e.try(http.MethodPost, "/v1/traces", map[string]string{"Content-Type": ctProto}, req)
		if err != nil {
			r.status = -1
		}
		done <- r
	}()
	testkit.WaitFor(t, "the batch to reach the destination", func() bool { return rec.Held() > 0 })
	select {
	case r := <-done:
		t.Fatalf("answered %d before the destination finished", r.status)
	default:
	}
	rec.Release(true)
	if r := <-done; r.status != 200 || len(r.body) != 0 {
		t.Fatalf("after delivery: %d %q", r.status, r.body)
	}
	rec.SetFail(true)
	r := e.post(t, "/v1/traces", req)
	wantStatus(t, r, 503, codes.Unavailable, msgUpstream)
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
}

// Shutdown answers the requests it is handling: an -ack=upstream request whose batch never
// finishes is answered 503 once the shutdown's time is up, and Shutdown returns.
func TestShutdownCutsUpstreamWaits(t *testing.T) {
	pc := testPipelineConfig()
	pc.Ack = pipeline.AckUpstream
	pc.Eager = true
	rec := testkit.NewHoldingRecorder("recorder")
	e := start(t, pc, DefaultConfig(), rec)
	done := make(chan response, 1)
	body := traces(t, 1, 1)
	go func() {
		r, _ := e.try(http.MethodPost, "/v1/traces", map[string]string{"Content-Type": ctProto}, body)
		done <- r
	}()
	testkit.WaitFor(t, "the batch to reach the destination", func() bool { return rec.Held() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	e.srv.Shutdown(ctx)
	// The connection is closed after the 503 is written, or before; either way the client has
	// no 200.
	select {
	case r := <-done:
		if r.status == 200 {
			t.Fatalf("answered 200 for an undelivered batch")
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiting request was never answered")
	}
}

// JSON answers for JSON requests: a google.rpc.Status in protojson.
func TestErrorsInRequestEncoding(t *testing.T) {
	e := start(t, testPipelineConfig(), DefaultConfig(), nil)
	r := e.do(t, "GET", "/v1/logs", map[string]string{"Content-Type": "application/json; charset=utf-8"}, nil)
	if r.status != 405 || r.header.Get("Content-Type") != ctJSON {
		t.Fatalf("%d %q", r.status, r.header.Get("Content-Type"))
	}
	st := &spb.Status{}
	if err := protojson.Unmarshal(r.body, st); err != nil || st.Code != int32(codes.Unimplemented) || st.Message != "method not allowed: OTLP/HTTP takes POST" {
		t.Errorf("%q: %v %v", r.body, st, err)
	}
}

// fasthttp's worker pool wakes every MaxIdleWorkerDuration to look for idle workers, traffic
// or not; the intake sets it to a minute (its default, 10 s, was an idle process's most
// frequent wake-up), no longer than a silent keep-alive connection is kept by default.
func TestIdleWorkerLife(t *testing.T) {
	cfg := DefaultConfig()
	s, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.hs.MaxIdleWorkerDuration; got != idleWorkerLife || got < time.Minute || got > cfg.IdleTimeout {
		t.Errorf("fasthttp's MaxIdleWorkerDuration %v, want idleWorkerLife (%v), from a minute up to -http.idle-timeout (%v)", got, idleWorkerLife, cfg.IdleTimeout)
	}
}
