package client

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/strictsink"
)

// h2Config is a v1 unary destination on otlpgate's own transport.
func h2Config(t testing.TB, addr string) Config {
	cfg := testConfig(t, addr)
	cfg.Protocol, cfg.Mode, cfg.Transport = ProtocolV1, ModeUnary, TransportOtlpgate
	cfg.Concurrency = 2
	return cfg
}

// startStrict starts the strict upstream (grpc-go, the Collector's pdata decoder) for a test.
func startStrict(t *testing.T) *strictsink.Sink {
	t.Helper()
	s, err := strictsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// sinkSignalTags lists what the sink accepted per signal: span names, metric names, log
// bodies (the tags of traceBody, metricsBody, logsBody), sorted.
func sinkSignalTags(s *strictsink.Sink) [fastpath.NumSignals][]string {
	var out [fastpath.NumSignals][]string
	out[fastpath.Traces] = sinkTags(s)
	for _, md := range s.Metrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					out[fastpath.Metrics] = append(out[fastpath.Metrics], m.Name())
				}
			}
		}
	}
	for _, ld := range s.Logs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					out[fastpath.Logs] = append(out[fastpath.Logs], lr.Body().Str())
				}
			}
		}
	}
	for i := range out {
		slices.Sort(out[i])
	}
	return out
}

// sendThreeSignals admits n batches of each signal, tagged t<i>, m<i>, l<i>, and returns the
// tags each signal must arrive with, sorted.
func sendThreeSignals(f *feeder, n, pad int) [fastpath.NumSignals][]string {
	var want [fastpath.NumSignals][]string
	for i := range n {
		tt, mt, lt := fmt.Sprintf("t%03d", i), fmt.Sprintf("m%03d", i), fmt.Sprintf("l%03d", i)
		f.sendSignal(fastpath.Traces, tt, traceBody(tt, 1, pad))
		f.sendSignal(fastpath.Metrics, mt, metricsBody(mt))
		f.sendSignal(fastpath.Logs, lt, logsBody(lt))
		want[fastpath.Traces] = append(want[fastpath.Traces], tt)
		want[fastpath.Metrics] = append(want[fastpath.Metrics], mt)
		want[fastpath.Logs] = append(want[fastpath.Logs], lt)
	}
	return want
}

// checkExact fails unless every batch was delivered and the sink holds exactly want.
func checkExact(t *testing.T, f *feeder, s *strictsink.Sink, want [fastpath.NumSignals][]string) {
	t.Helper()
	for i, ok := range f.waitAll() {
		if !ok {
			t.Errorf("batch %d was not delivered", i)
		}
	}
	got := sinkSignalTags(s)
	for sig := range fastpath.NumSignals {
		if !slices.Equal(got[sig], want[sig]) {
			t.Errorf("%v: the upstream got %v, want %v once each", sig, got[sig], want[sig])
		}
		if n := s.Refused(sig); n != 0 {
			t.Errorf("%v: the strict upstream refused %d requests: %v", sig, n, s.LastError())
		}
	}
}

// Traces, metrics and logs sent through transport=otlpgate reach a grpc-go upstream that
// decodes them with the Collector's pdata exactly once each.
func TestH2UnaryThreeSignalsStrict(t *testing.T) {
	s := startStrict(t)
	d := startDest(t, h2Config(t, s.Addr()))
	if d.conn != nil || d.h2 == nil {
		t.Fatal("transport=otlpgate built a grpc-go connection")
	}
	f := newFeeder(t, d)
	want := sendThreeSignals(f, 20, 100)
	checkExact(t, f, s, want)
	if n := dropsOf(d); n != 0 {
		t.Errorf("%d requests dropped", n)
	}
}

// transport=otlpgate refuses, by name, what it does not do yet.
func TestH2TransportValidate(t *testing.T) {
	for _, c := range []struct{ dest, want string }{
		{"protocol=v1,transport=otlpgate", ""},
		{"protocol=v1,transport=grpc-go", ""},
		{"protocol=v1,transport=quic", `transport "quic" (want grpc-go or otlpgate)`},
		{"protocol=otep,mode=stream,transport=otlpgate", "transport=otlpgate speaks protocol v1 only for now, not otep: use transport=grpc-go"},
		{"protocol=otep,mode=unary,transport=otlpgate", "transport=otlpgate speaks protocol v1 only for now, not otep: use transport=grpc-go"},
		{"protocol=v1,transport=otlpgate,tls=true", "transport=otlpgate speaks plaintext HTTP/2 (h2c) only for now: use tls=false or transport=grpc-go"},
		{"protocol=v1,transport=otlpgate,compression=gzip", "transport=otlpgate does not compress yet (compression=gzip): use transport=grpc-go"},
		{"protocol=v1,transport=otlpgate,forward-headers=x-tenant", "transport=otlpgate does not send forward-headers yet: use transport=grpc-go"},
	} {
		t.Run(c.dest, func(t *testing.T) {
			cfg, err := ParseDest("name=x,endpoint=127.0.0.1:4317,"+c.dest, DefaultConfig())
			if err == nil {
				err = cfg.Validate()
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if c.want == "" && got != "" || c.want != "" && !strings.HasSuffix(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
