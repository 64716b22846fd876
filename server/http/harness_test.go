package httpserver

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/internal/ziptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp refreshes its cached Date header from one process-wide goroutine.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// Its worker pool's cleaner notices a stopped server only at its next wake-up, up to
		// MaxIdleWorkerDuration (10s) later; it holds nothing.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

type env struct {
	p   *pipeline.Pipeline
	srv *Server
	rec *testkit.Recorder
	url string
	hc  *http.Client
}

func testPipelineConfig() pipeline.Config {
	c := pipeline.DefaultConfig()
	c.BatchMaxAge = time.Hour // tests flush explicitly
	c.Eager = false
	return c
}

func start(t *testing.T, pc pipeline.Config, sc Config, rec *testkit.Recorder) *env {
	t.Helper()
	if rec == nil {
		rec = &testkit.Recorder{}
	}
	return startWith(t, pc, sc, rec, rec)
}

// startWith is start with d, which hands its batches to rec, as the pipeline's destination.
func startWith(t *testing.T, pc pipeline.Config, sc Config, rec *testkit.Recorder, d pipeline.Destination) *env {
	t.Helper()
	p, err := pipeline.New(pc, []pipeline.Destination{d})
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
	if err := srv.Serve(ln); err != nil {
		t.Fatal(err)
	}
	e := &env{p: p, srv: srv, rec: rec, url: "http://" + ln.Addr().String(),
		hc: &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableCompression: true}}}
	t.Cleanup(func() {
		e.hc.CloseIdleConnections()
		rec.Release(true)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		p.Close()
	})
	return e
}

// response is what a test request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (e *env) do(t *testing.T, method, path string, hdr map[string]string, body []byte) response {
	t.Helper()
	r, err := e.try(method, path, hdr, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// try is do for goroutines other than the test's.
func (e *env) try(method, path string, hdr map[string]string, body []byte) (response, error) {
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{resp.StatusCode, resp.Header, b}, nil
}

func (e *env) post(t *testing.T, path string, body []byte) response {
	t.Helper()
	return e.do(t, http.MethodPost, path, map[string]string{"Content-Type": ctProto}, body)
}

// status decodes a protobuf google.rpc.Status body.
func status(t *testing.T, b []byte) *spb.Status {
	t.Helper()
	st := &spb.Status{}
	if err := proto.Unmarshal(b, st); err != nil {
		t.Fatalf("body is no google.rpc.Status: %v (%q)", err, b)
	}
	return st
}

func gzipped(t testing.TB, b []byte) []byte { return ziptest.Gzip(t, b) }

func zstded(t testing.TB, b []byte) []byte { return ziptest.Zstd(t, nil, b) }

func newPipeline(t *testing.T) (*pipeline.Pipeline, func()) {
	t.Helper()
	p, err := pipeline.New(testPipelineConfig(), []pipeline.Destination{&testkit.Recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	return p, p.Close
}
