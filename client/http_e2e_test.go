package client

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	httpserver "github.com/otlpgate/otlpgate/server/http"
)

// startHTTPIntake runs otlpgate's own OTLP/HTTP intake on 127.0.0.1 in front of a pipeline that
// seals every request as its own batch for the sink and answers only once the sink has it.
func startHTTPIntake(t *testing.T, tokenFile string) (*testkit.Recorder, string) {
	t.Helper()
	sink := testkit.NewRecorder("sink")
	pc := pipeline.DefaultConfig()
	pc.Ack = pipeline.AckUpstream
	pc.BatchMaxItems = 1
	p, err := pipeline.New(pc, []pipeline.Destination{sink})
	if err != nil {
		t.Fatal(err)
	}
	sc := httpserver.DefaultConfig()
	sc.AuthTokenFile = tokenFile
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sc.Listen = ln.Addr().String()
	srv, err := httpserver.New(sc, p, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		srv.Shutdown(ctx)
		p.Close()
	})
	return sink, "http://" + ln.Addr().String()
}

// otlpgate's OTLP/HTTP destination delivers to otlpgate's own OTLP/HTTP intake: every signal,
// with every compression, arrives in the receiving pipeline as exactly the bytes admitted on
// the sending side. The intake's bearer token is presented from bearer-token-file; a
// destination without it is answered 401 and drops the batch (counted rejected) after one
// attempt.
func TestHTTPEndToEndOwnIntake(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("e2e-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sink, url := startHTTPIntake(t, token)
	var want [fastpath.NumSignals][][]byte
	for _, comp := range []string{"none", "gzip", "zstd"} {
		base := testConfig(t, "")
		cfg, err := ParseDest("name="+base.Name+"_"+comp+",endpoint="+url+",protocol=http,concurrency=2,compression="+comp+
			",bearer-token-file="+token, base)
		if err != nil {
			t.Fatal(err)
		}
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		bodies := [fastpath.NumSignals][]byte{traceBody("e2e-"+comp, 2, 100), httpMetricsBody("e2e-" + comp), httpLogsBody("e2e-" + comp)}
		for sig, b := range bodies {
			f.admit(fastpath.Signal(sig), b)
			want[sig] = append(want[sig], b)
		}
		if ok := f.waitAll(); !allTrue(ok) {
			t.Fatalf("%s: delivered %v", comp, ok)
		}
		if got := value(d.m.ackedRequests); got != 3 {
			t.Errorf("%s: acknowledged %d, want 3", comp, got)
		}
	}
	for sig := range fastpath.NumSignals {
		got := sink.Bodies(fastpath.Signal(sig))
		if len(got) != len(want[sig]) {
			t.Fatalf("signal %d: %d batches at the sink, want %d", sig, len(got), len(want[sig]))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[sig][i]) {
				t.Errorf("signal %d batch %d: %d bytes at the sink differ from the %d admitted", sig, i, len(got[i]), len(want[sig][i]))
			}
		}
	}

	// No token: 401, which the specification does not let a client retry.
	base := testConfig(t, "")
	cfg, err := ParseDest("name="+base.Name+"_notoken,endpoint="+url+",protocol=http,concurrency=1", base)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RetryMaxElapsed = time.Minute
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(0, 1, 1, 10)
	if f.wait(0) {
		t.Fatal("delivered without the token")
	}
	if got := value(d.m.dropped[DropRejected]); got != 1 {
		t.Errorf("rejected %d, want 1", got)
	}
	if got := value(d.m.sentRequests); got != 1 {
		t.Errorf("sent %d times, want once", got)
	}
	if n := len(sink.Bodies(fastpath.Traces)); n != 3 {
		t.Errorf("the sink has %d trace batches, want the 3 sent with the token", n)
	}
}
