package interop

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/faultproxy"
	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// peer is a gRPC implementation other than otlpgate's that runs as a client of otlpgate's
// intake and as an upstream of its destinations, speaking the JSON options and lines of
// testdata/node/peer.js.
type peer struct {
	name string
	// available skips the test (need) when the peer is not installed.
	available func(t testing.TB)
	// command is the program and arguments that run the peer with the JSON options opts.
	command func(t testing.TB, opts map[string]any) (string, []string)
	// compressions are the grpc-encodings the peer sends and accepts besides identity.
	compressions []string
}

// call is one Export call of a peer client: spans (first..first+count-1 as span ids, each with
// a string attribute of pad bytes), metrics (a gauge per name) or log records (one per body).
type call struct {
	Signal string   `json:"signal"`
	First  uint64   `json:"first,omitempty"`
	Count  int      `json:"count,omitempty"`
	Pad    int      `json:"pad,omitempty"`
	Names  []string `json:"names,omitempty"`
	Bodies []string `json:"bodies,omitempty"`
}

// want is what a set of calls must deliver: span ids, metric names and log bodies, each once.
type want struct {
	spans         map[uint64]int
	metrics, logs []string
}

func (w *want) add(calls []call) {
	if w.spans == nil {
		w.spans = map[uint64]int{}
	}
	for _, c := range calls {
		switch c.Signal {
		case "traces":
			for i := range c.Count {
				w.spans[c.First+uint64(i)]++
			}
		case "metrics":
			w.metrics = append(w.metrics, c.Names...)
		case "logs":
			w.logs = append(w.logs, c.Bodies...)
		}
	}
}

// plan is the calls of one run whose ids start at first: every signal, and with large a trace
// request of about 2 MiB, which crosses about 130 DATA frames of 16 KiB and many stream windows.
func plan(tag string, first uint64, large bool) []call {
	calls := []call{
		{Signal: "traces", First: first, Count: 5, Pad: 16},
		{Signal: "metrics", Names: []string{tag + ".m1", tag + ".m2"}},
		{Signal: "logs", Bodies: []string{tag + " one", tag + " two", tag + " three"}},
		{Signal: "traces", First: first + 5, Count: 3},
	}
	if large {
		calls = append(calls, call{Signal: "traces", First: first + 100, Count: 200, Pad: 10 << 10})
	}
	return calls
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// checkSink fails the test unless the strict upstream holds exactly w: every span as many times
// as w counts it and nothing else, the metric names and the log bodies (in any order).
func checkSink(t *testing.T, sink *strictsink.Sink, w want) {
	t.Helper()
	got := func() map[uint64]int {
		m := map[uint64]int{}
		for id, n := range sink.Spans() {
			m[binary.BigEndian.Uint64(id[:])] += n
		}
		return m
	}
	testkit.WaitFor(t, fmt.Sprintf("%d spans, %d metrics and %d log records at the upstream", total(w.spans), len(w.metrics), len(w.logs)), func() bool {
		return total(got()) >= total(w.spans) && len(sinkMetrics(sink)) >= len(w.metrics) && len(sinkLogs(sink)) >= len(w.logs)
	})
	if g := got(); !maps.Equal(g, w.spans) {
		t.Errorf("spans at the upstream differ: %d distinct, want %d (first differences: %s)", len(g), len(w.spans), diffIDs(g, w.spans))
	}
	if g := sinkMetrics(sink); !slices.Equal(g, sorted(w.metrics)) {
		t.Errorf("metrics at the upstream: %v, want %v", g, sorted(w.metrics))
	}
	if g := sinkLogs(sink); !slices.Equal(g, sorted(w.logs)) {
		t.Errorf("log records at the upstream: %v, want %v", g, sorted(w.logs))
	}
	for sig := range fastpath.NumSignals {
		if n := sink.Refused(sig); n != 0 {
			t.Errorf("%s: the strict upstream refused %d requests: %v", sig, n, sink.LastError())
		}
	}
}

func total(m map[uint64]int) (n int) {
	for _, c := range m {
		n += c
	}
	return n
}

func diffIDs(got, want map[uint64]int) string {
	var d []string
	for id, n := range want {
		if got[id] != n {
			d = append(d, fmt.Sprintf("%d: %d times", id, got[id]))
		}
	}
	for id, n := range got {
		if _, ok := want[id]; !ok {
			d = append(d, fmt.Sprintf("%d (not sent): %d times", id, n))
		}
	}
	slices.Sort(d)
	return strings.Join(d[:min(len(d), 8)], ", ")
}

func sinkMetrics(s *strictsink.Sink) []string {
	var out []string
	for _, md := range s.Metrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					out = append(out, m.Name())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func sinkLogs(s *strictsink.Sink) []string {
	var out []string
	for _, ld := range s.Logs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					out = append(out, lr.Body().Str())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// testPeerClients is the peer as a client of otlpgate's intake on each transport, plain and
// TLS (with the smallest flow-control windows), sending every signal without compression, in
// each of its compressions, and a large message; a strict upstream (the Collector's decoder)
// must receive exactly what it sent.
func testPeerClients(t *testing.T, p peer) {
	p.available(t)
	for _, tr := range transports {
		for _, tls := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tls=%v", tr, tls), func(t *testing.T) {
				t.Parallel()
				sink, err := strictsink.Start("127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(sink.Close)
				args := []string{"-grpc.transport", tr, "-dest", "name=up,endpoint=" + sink.Addr() + ",protocol=v1,retry-initial=20ms"}
				opts := map[string]any{"mode": "client"}
				if tls {
					cert, key := testkit.SelfSigned(t, t.TempDir())
					// With TLS, the smallest windows the intake allows (64 KiB a stream and a
					// connection, against 1 MiB and 8 MiB by default): the large message waits
					// for the intake's WINDOW_UPDATEs 32 times.
					args = append(args, "-grpc.tls.cert", cert, "-grpc.tls.key", key,
						"-grpc.http2.stream-window", "64KiB", "-grpc.http2.conn-window", "64KiB")
					opts["ca"] = cert
				}
				g := startGate(t, args...)
				opts["target"] = g.GRPC
				var w want
				first := uint64(1)
				for _, comp := range append([]string{"identity"}, p.compressions...) {
					// The large message goes uncompressed: compressed, its padding would cross
					// few frames.
					calls := plan(fmt.Sprintf("%s-%s-%v-%s", p.name, tr, tls, comp), first, comp == "identity")
					first += 1000
					opts["compression"], opts["calls"] = comp, calls
					name, argv := p.command(t, opts)
					lines, err := runPeerClient(t, name, argv...)
					if err != nil || len(lines) != len(calls) {
						t.Fatalf("%s client, %s: %v, calls %+v", p.name, comp, err, lines)
					}
					for _, l := range lines {
						if !l.OK {
							t.Fatalf("%s client, %s: call %d failed: code %d %s", p.name, comp, *l.Call, l.Code, l.Details)
						}
					}
					w.add(calls)
					checkSink(t, sink, w)
				}
				if len(p.compressions) > 0 {
					// The intake counts the requests that arrived compressed in
					// -grpc.passthrough-encoding (gzip): proof that the peer compressed.
					if n := g.metric(t, "otlpgate_fastpath_passthrough_requests_total"); n == 0 {
						t.Errorf("no request arrived gzip-compressed")
					}
				}
			})
		}
	}
}

// testPeerClientsGoAway is the peer as a client of otlpgate's intake on each transport, which
// sends GOAWAY to every connection older than 150ms (-grpc.max-connection-age) while the peer
// makes 15 rounds of calls of every signal 20ms apart: every call succeeds, the peer dials
// again after each GOAWAY (a proxy in between counts its connections), and the strict upstream
// gets exactly what was sent, each item once.
func testPeerClientsGoAway(t *testing.T, p peer) {
	p.available(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			sink, err := strictsink.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sink.Close)
			g := startGate(t, "-grpc.transport", tr, "-grpc.max-connection-age", "150ms", "-grpc.max-connection-age-grace", "10s",
				"-dest", "name=up,endpoint="+sink.Addr()+",protocol=v1,retry-initial=20ms")
			px, err := faultproxy.New(g.GRPC)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { px.Close() })
			var calls []call
			for i := range 15 {
				calls = append(calls, plan(fmt.Sprintf("%s-age-%s-%d", p.name, tr, i), uint64(1+i*100), false)...)
			}
			name, argv := p.command(t, map[string]any{"mode": "client", "target": px.Addr(), "gap": 20, "calls": calls})
			lines, err := runPeerClient(t, name, argv...)
			if err != nil || len(lines) != len(calls) {
				t.Fatalf("%s client: %v, %d of %d calls", p.name, err, len(lines), len(calls))
			}
			for _, l := range lines {
				if !l.OK {
					t.Errorf("%s client: call %d failed: code %d %s", p.name, *l.Call, l.Code, l.Details)
				}
			}
			var w want
			w.add(calls)
			checkSink(t, sink, w)
			t.Logf("%s client, intake on %s: %d calls on %d connections", p.name, tr, len(calls), px.Accepted())
			if px.Accepted() < 2 {
				t.Errorf("the peer used %d connections; with GOAWAY every 150ms it should have dialled again", px.Accepted())
			}
		})
	}
}

// testPeerClientsTooLarge is the peer sending the intake, on each transport, a request over
// -grpc.max-recv-msg-size (1MiB here), as it is on the wire and, gzip-compressed, once
// inflated, then a small one on the same channel: the first is answered RESOURCE_EXHAUSTED
// with grpc-go's words (the same on both transports), the second succeeds, and the upstream
// gets the small request's spans and nothing of the large one.
func testPeerClientsTooLarge(t *testing.T, p peer) {
	p.available(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			sink, err := strictsink.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sink.Close)
			g := startGate(t, "-grpc.transport", tr, "-grpc.max-recv-msg-size", "1MiB",
				"-dest", "name=up,endpoint="+sink.Addr()+",protocol=v1,retry-initial=20ms")
			var w want
			for i, comp := range append([]string{"identity"}, p.compressions...) {
				first := uint64(1 + i*10000)
				small := []call{{Signal: "traces", First: first + 5000, Count: 2}}
				calls := append([]call{{Signal: "traces", First: first, Count: 200, Pad: 10 << 10}}, small...)
				name, argv := p.command(t, map[string]any{"mode": "client", "target": g.GRPC, "calls": calls, "compression": comp})
				lines, _ := runPeerClient(t, name, argv...)
				if len(lines) != 2 {
					t.Fatalf("%s: %d call lines, want 2: %+v", comp, len(lines), lines)
				}
				if l := lines[0]; l.OK || l.Code != int(codes.ResourceExhausted) || !strings.Contains(l.Details, "larger than max") {
					t.Errorf("%s: the 2 MB request was answered ok=%v code %d %q, want RESOURCE_EXHAUSTED (larger than max)", comp, l.OK, l.Code, l.Details)
				}
				if !lines[1].OK {
					t.Errorf("%s: the small request after it failed: code %d %s", comp, lines[1].Code, lines[1].Details)
				}
				w.add(small)
				checkSink(t, sink, w)
			}
		})
	}
}

// testPeerClientsParallel is the peer making 202 calls at once on one channel (every signal,
// two of them 2 MiB) to the intake on each transport, which lets 4 streams of a connection
// open at once (-grpc.max-concurrent-streams): the peer queues the rest within that bound,
// every call succeeds, and the upstream gets exactly what was sent, each item once.
func testPeerClientsParallel(t *testing.T, p peer) {
	p.available(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			sink, err := strictsink.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sink.Close)
			g := startGate(t, "-grpc.transport", tr, "-grpc.max-concurrent-streams", "4",
				"-dest", "name=up,endpoint="+sink.Addr()+",protocol=v1,retry-initial=20ms")
			var calls []call
			for i := range 50 {
				calls = append(calls, plan(fmt.Sprintf("%s-parallel-%s-%d", p.name, tr, i), uint64(1+i*1000), i%25 == 0)...)
			}
			name, argv := p.command(t, map[string]any{"mode": "client", "target": g.GRPC, "calls": calls, "parallel": true})
			lines, err := runPeerClient(t, name, argv...)
			if err != nil || len(lines) != len(calls) {
				t.Fatalf("%s client: %v, %d of %d calls answered", p.name, err, len(lines), len(calls))
			}
			for _, l := range lines {
				if !l.OK {
					t.Errorf("call %d failed: code %d %s", *l.Call, l.Code, l.Details)
				}
			}
			var w want
			w.add(calls)
			checkSink(t, sink, w)
		})
	}
}

// testPeerClientsOTEP is the peer calling otlpgate's OTEP services on the intake of each
// transport, unary and streamed: every signal and a 2 MiB request, each answered Success with
// its id, and exactly the sent items at the strict upstream.
func testPeerClientsOTEP(t *testing.T, p peer) {
	p.available(t)
	for _, tr := range transports {
		for _, mode := range []string{"unary", "stream"} {
			t.Run(tr+"/"+mode, func(t *testing.T) {
				t.Parallel()
				sink, err := strictsink.Start("127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(sink.Close)
				g := startGate(t, "-grpc.transport", tr, "-dest", "name=up,endpoint="+sink.Addr()+",protocol=v1,retry-initial=20ms")
				calls := plan(fmt.Sprintf("%s-otep-%s-%s", p.name, tr, mode), 1, true)
				name, argv := p.command(t, map[string]any{"mode": "client", "target": g.GRPC, "otep": mode, "calls": calls})
				lines, err := runPeerClient(t, name, argv...)
				if err != nil || len(lines) != len(calls) {
					t.Fatalf("%s OTEP %s client: %v, calls %+v", p.name, mode, err, lines)
				}
				for _, l := range lines {
					if !l.OK {
						t.Errorf("call %d: code %d %s", *l.Call, l.Code, l.Details)
					}
				}
				var w want
				w.add(calls)
				checkSink(t, sink, w)
			})
		}
	}
}

// sendToGate exports calls to otlpgate's intake at addr with a grpc-go client, as requests
// built here, each answered before the next.
func sendToGate(t *testing.T, addr string, calls []call) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	str := func(s string) *commonv1.AnyValue {
		return &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: s}}
	}
	for _, c := range calls {
		var err error
		switch c.Signal {
		case "traces":
			var spans []*tracev1.Span
			for i := range c.Count {
				id := binary.BigEndian.AppendUint64(nil, c.First+uint64(i))
				spans = append(spans, &tracev1.Span{TraceId: append(make([]byte, 8), id...), SpanId: id, Name: "go",
					StartTimeUnixNano: 1, EndTimeUnixNano: 2,
					Attributes: []*commonv1.KeyValue{{Key: "pad", Value: str(strings.Repeat("y", c.Pad))}}})
			}
			_, err = coltracev1.NewTraceServiceClient(conn).Export(ctx, &coltracev1.ExportTraceServiceRequest{
				ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{Spans: spans}}}}})
		case "metrics":
			var ms []*metricsv1.Metric
			for i, n := range c.Names {
				ms = append(ms, &metricsv1.Metric{Name: n, Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{
					DataPoints: []*metricsv1.NumberDataPoint{{TimeUnixNano: 1, Value: &metricsv1.NumberDataPoint_AsInt{AsInt: int64(i)}}}}}})
			}
			_, err = colmetricsv1.NewMetricsServiceClient(conn).Export(ctx, &colmetricsv1.ExportMetricsServiceRequest{
				ResourceMetrics: []*metricsv1.ResourceMetrics{{ScopeMetrics: []*metricsv1.ScopeMetrics{{Metrics: ms}}}}})
		case "logs":
			var rs []*logsv1.LogRecord
			for _, b := range c.Bodies {
				rs = append(rs, &logsv1.LogRecord{TimeUnixNano: 1, Body: str(b)})
			}
			_, err = collogsv1.NewLogsServiceClient(conn).Export(ctx, &collogsv1.ExportLogsServiceRequest{
				ResourceLogs: []*logsv1.ResourceLogs{{ScopeLogs: []*logsv1.ScopeLogs{{LogRecords: rs}}}}})
		}
		if err != nil {
			t.Fatalf("export of %s to otlpgate: %v", c.Signal, err)
		}
	}
}

// checkPeer fails the test unless the peer server decoded exactly w (every span once), and
// every request it got came in encoding (where the peer reports encodings).
func checkPeer(t *testing.T, srv upstream, w want, encoding string) {
	t.Helper()
	wantSpans := map[string]int{}
	for id, n := range w.spans {
		wantSpans[hex.EncodeToString(binary.BigEndian.AppendUint64(nil, id))] = n
	}
	count := func(ids []string) map[string]int {
		m := map[string]int{}
		for _, id := range ids {
			m[id]++
		}
		return m
	}
	testkit.WaitFor(t, fmt.Sprintf("%d spans, %d metrics and %d log records at the peer", len(w.spans), len(w.metrics), len(w.logs)), func() bool {
		s, _ := received(srv, "traces")
		m, _ := received(srv, "metrics")
		l, _ := received(srv, "logs")
		return len(count(s)) >= len(wantSpans) && len(m) >= len(w.metrics) && len(l) >= len(w.logs)
	})
	spans, encS := received(srv, "traces")
	if g := count(spans); !maps.Equal(g, wantSpans) {
		t.Errorf("spans at the peer: %d distinct of %d received, want %d each once", len(g), len(spans), len(wantSpans))
	}
	metrics, encM := received(srv, "metrics")
	if g := sorted(metrics); !slices.Equal(g, sorted(w.metrics)) {
		t.Errorf("metrics at the peer: %v, want %v", g, sorted(w.metrics))
	}
	logs, encL := received(srv, "logs")
	if g := sorted(logs); !slices.Equal(g, sorted(w.logs)) {
		t.Errorf("log records at the peer: %v, want %v", g, sorted(w.logs))
	}
	for _, enc := range []map[string]int{encS, encM, encL} {
		for e := range enc {
			if e != encoding {
				t.Errorf("the peer received requests in grpc-encoding %q, want %q only: %v", e, encoding, enc)
			}
		}
	}
}

// testPeerServers is the peer as the upstream of an otlpgate destination on each transport,
// plain without compression and TLS in each compression the peer accepts, with a large
// message: otlpgate's intake gets requests built here and the peer must decode exactly them.
func testPeerServers(t *testing.T, p peer) {
	p.available(t)
	// Plain without compression, and TLS in each compression the peer accepts.
	type variant struct {
		tls  bool
		comp string
	}
	variants := []variant{{false, "identity"}}
	for _, c := range p.compressions {
		variants = append(variants, variant{true, c})
	}
	for _, tr := range transports {
		for _, v := range variants {
			tls, comp := v.tls, v.comp
			t.Run(fmt.Sprintf("%s/tls=%v/%s", tr, tls, comp), func(t *testing.T) {
				t.Parallel()
				opts := map[string]any{"mode": "server"}
				dest := "name=peer,protocol=v1,retry-initial=20ms,transport=" + tr
				if comp != "identity" {
					dest += ",compression=" + comp
				}
				if tls {
					cert, key := testkit.SelfSigned(t, t.TempDir())
					opts["cert"], opts["key"] = cert, key
					dest += ",tls-ca=" + cert
				}
				srv, g := startPeerUpstream(t, p, opts, dest)
				calls := plan(fmt.Sprintf("%s-%s-%v-%s", p.name, tr, tls, comp), 1, true)
				sendToGate(t, g.GRPC, calls)
				var w want
				w.add(calls)
				checkPeer(t, srv, w, comp)
			})
		}
	}
}

// startPeerUpstream starts the peer as a server with opts and an otlpgate whose destination
// dest (without its endpoint) sends to it, with batches of up to 8 MiB.
func startPeerUpstream(t *testing.T, p peer, opts map[string]any, dest string) (*peerServer, *gate) {
	t.Helper()
	name, argv := p.command(t, opts)
	srv := startPeerServer(t, name, argv...)
	return srv, startGate(t, "-batch.max-bytes", "8MiB", "-dest", dest+",endpoint="+srv.Addr)
}

// jsonArg is opts as one command-line argument.
func jsonArg(t testing.TB, opts map[string]any) string {
	t.Helper()
	b, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
