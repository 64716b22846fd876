package client

import (
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"

	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// listenAgain listens on addr, which a server of the test just left.
func listenAgain(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	for range 100 { // the port is ours; a busy kernel may take a moment to release it
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("cannot listen again on %s: %v", addr, err)
	return nil
}

// dropsOf sums what d dropped, every reason.
func dropsOf(d *Dest) int {
	n := 0
	for _, c := range d.m.dropped {
		n += value(c)
	}
	return n
}

// waitUnserved waits until d shows the signal unserved, with an error naming call and fix.
func waitUnserved(t *testing.T, d *Dest, call, fix string) {
	t.Helper()
	testkit.WaitFor(t, "the destination to show the upstream does not serve "+call, func() bool {
		msg, _ := d.LastError()
		return d.unservedSignals() == 1 && strings.Contains(msg, "does not serve "+call) && strings.Contains(msg, fix)
	})
	msg, _ := d.LastError()
	t.Logf("last error: %s", msg)
	if v, n := scrapeGauge(t, "otlpgate_client_unserved_signals", d.cfg.Name); v != 1 || n != 1 {
		t.Errorf("otlpgate_client_unserved_signals: %d series summing %v, want 1 series of 1", n, v)
	}
}

// A gRPC upstream that does not serve what a destination sends (a grpc-go server without the
// service: what a Collector is to OTEP, or any server to a signal it has no pipeline for)
// answers UNIMPLEMENTED. Nothing is dropped: the destination shows the signal unserved, with
// an error that names the call and says what to change, and keeps every batch, sending it
// again after the backoff. Once the upstream serves it (a Collector-like sink, or an otlpgate,
// comes up on the address) every batch arrives exactly once and the mark clears.
func TestUnservedKeptUntilServed(t *testing.T) {
	for _, c := range []struct {
		name, protocol, mode, call, fix string
	}{
		{"v1", ProtocolV1, ModeUnary, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", "endpoint=http://host:port (protocol=http)"},
		{"otep-unary", ProtocolOTEP, ModeUnary, "/otlpgate.otep.v1.UnaryExporter/ExportTraces", "leave protocol out (or set protocol=v1"},
		{"otep-stream", ProtocolOTEP, ModeStream, "/otlpgate.otep.v1.StreamExporter/ExportTraces", "leave protocol out (or set protocol=v1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			bare := grpc.NewServer() // no service registered
			done := make(chan struct{})
			go func() { defer close(done); bare.Serve(ln) }()
			cfg := testConfig(t, addr)
			cfg.Protocol, cfg.Mode = c.protocol, c.mode
			d := startDest(t, cfg)
			f := newFeeder(t, d)
			f.send(0, 5, 1, 10)
			waitUnserved(t, d, c.call, c.fix)
			if n := dropsOf(d); n != 0 {
				t.Fatalf("%d requests dropped for an upstream that does not serve them", n)
			}

			bare.Stop()
			<-done
			var tags func() []string
			if c.protocol == ProtocolV1 {
				var sink *strictsink.Sink
				for range 100 { // the port is ours; a busy kernel may take a moment to release it
					if sink, err = strictsink.Start(addr); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(sink.Close)
				tags = func() []string { return sinkTags(sink) }
			} else {
				u := &upstream{t: t, addr: addr, changed: make(chan struct{})}
				u.serve(listenAgain(t, addr))
				t.Cleanup(u.stop)
				tags = u.tags
			}
			for i, ok := range f.waitAll() {
				if !ok {
					t.Errorf("batch %d was not delivered", i)
				}
			}
			got := tags()
			slices.Sort(got)
			if want := tagList(0, 4); !slices.Equal(got, want) {
				t.Errorf("the upstream got %v, want %v once each", got, want)
			}
			if n := dropsOf(d); n != 0 {
				t.Errorf("%d requests dropped", n)
			}
			if n := d.unservedSignals(); n != 0 {
				t.Errorf("%d signals still marked unserved after deliveries", n)
			}
		})
	}
}

// sinkTags lists the span names (the batches' tags) a strict sink accepted.
func sinkTags(s *strictsink.Sink) []string {
	var out []string
	for _, td := range s.Traces() {
		rss := td.ResourceSpans()
		for i := range rss.Len() {
			sss := rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				for k := range sss.At(j).Spans().Len() {
					out = append(out, sss.At(j).Spans().At(k).Name())
				}
			}
		}
	}
	return out
}

// An OTLP/HTTP upstream behind the Collector's confighttp that has nothing at the path a
// destination POSTs to answers 404. Nothing is dropped: the signal is shown unserved with an
// error naming the URL and what to change, the batches are kept and sent again, and once the
// upstream serves the path every batch arrives exactly once, read by pdata.
func TestUnservedHTTPKeptUntilServed(t *testing.T) {
	mux := http.NewServeMux()
	addr := strictsink.ServeCollectorHTTP(t, mux)
	var mu sync.Mutex
	var got []string
	base := testConfig(t, "")
	cfg, err := ParseDest("name="+base.Name+",endpoint=http://"+addr, base) // no protocol: the scheme says http
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Protocol != ProtocolHTTP || cfg.Mode != ModeUnary {
		t.Fatalf("an http:// endpoint parsed to protocol %q, mode %q; want http, unary", cfg.Protocol, cfg.Mode)
	}
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(0, 5, 1, 10)
	waitUnserved(t, d, "POST http://"+addr+"/v1/traces", "check the endpoint's base path")
	if n := dropsOf(d); n != 0 {
		t.Fatalf("%d requests dropped for an upstream that does not serve them", n)
	}

	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if err == nil {
			err = req.UnmarshalProto(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rss := req.Traces().ResourceSpans()
		mu.Lock()
		for i := range rss.Len() {
			sss := rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				for k := range sss.At(j).Spans().Len() {
					got = append(got, sss.At(j).Spans().At(k).Name())
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		resp, _ := ptraceotlp.NewExportResponse().MarshalProto()
		w.Write(resp)
	})
	for i, ok := range f.waitAll() {
		if !ok {
			t.Errorf("batch %d was not delivered", i)
		}
	}
	mu.Lock()
	slices.Sort(got)
	if want := tagList(0, 4); !slices.Equal(got, want) {
		t.Errorf("the upstream got %v, want %v once each", got, want)
	}
	mu.Unlock()
	if n := dropsOf(d); n != 0 {
		t.Errorf("%d requests dropped", n)
	}
	if n := d.unservedSignals(); n != 0 {
		t.Errorf("%d signals still marked unserved after deliveries", n)
	}
}
