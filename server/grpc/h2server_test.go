package grpcserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// withTenants is a case's setup with a tenant table of x-scope-orgid (and the credentials
// creds, -auth.tenants-file, when set), in both the pipeline and the server.
func withTenants(creds []tenant.Credential) func(*testing.T, *pipeline.Config, *Config) *testkit.Recorder {
	return func(t *testing.T, pc *pipeline.Config, sc *Config) *testkit.Recorder {
		ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if creds != nil {
			if err := ts.SetCredentials(creds); err != nil {
				t.Fatal(err)
			}
			sc.AuthTokenFile = "" // the tenants file authenticates
		}
		pc.Tenants, sc.Tenants = ts, ts
		return nil
	}
}

// transports are the values of -grpc.transport, for tests that run on both.
var transports = []string{TransportGRPCGo, TransportOwn}

const tracesPath = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// A v1 call answers the same on both transports, success or refusal: the same status code,
// message and details (RetryInfo), and the same bytes at the destination. grpc-go is the
// oracle: each case's answer on it is the answer otlpgate's own transport must give.
func TestTransportsAnswerAlike(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	body := traceBody(t, 5, 4)
	large := traceBody(t, 9, 20000) // megabytes: many DATA frames, several windows
	bearer := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	type result struct {
		st    *status.Status
		resp  []byte // the response message as marshalled
		bytes []byte // what reached the destination
	}
	cases := []struct {
		name string
		cfg  func(*Config)
		call func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error
		// setup, when set, configures the pipeline too, and may give the destination.
		setup func(t *testing.T, pc *pipeline.Config, sc *Config) *testkit.Recorder
	}{
		{"valid", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(body).raw(), resp)
		}, nil},
		{"empty", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(nil).raw(), resp)
		}, nil},
		{"gzip", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(body).raw(), resp, grpc.UseCompressor(codec.Gzip))
		}, nil},
		{"too-large-inflated", func(c *Config) { c.MaxRecvMsgSize = 64 << 10 }, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(bytes.Repeat(body, 200)).raw(), resp, grpc.UseCompressor(codec.Gzip))
		}, nil},
		{"zstd", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(large).raw(), resp, grpc.UseCompressor(codec.Zstd))
		}, nil},
		{"large", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(large).raw(), resp)
		}, nil},
		{"metrics-typed", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			_, err := colmetricsv1.NewMetricsServiceClient(e.conn).Export(bearer, &colmetricsv1.ExportMetricsServiceRequest{})
			return err
		}, nil},
		{"garbage", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes([]byte{0x0a, 0x50, 0x01}).raw(), resp)
		}, nil},
		{"partial", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			bad := append(traceBody(t, 6, 2), 0x0a, 0x06, 0x12, 0x04, 0x12, 0x02, 0x0a, 0x05)
			return e.raw.Invoke(bearer, tracesPath, rawBytes(bad).raw(), resp)
		}, nil},
		{"no-token", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(context.Background(), tracesPath, rawBytes(body).raw(), resp)
		}, nil},
		{"wrong-token", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer wrong")
			return e.raw.Invoke(ctx, tracesPath, rawBytes(body).raw(), resp)
		}, nil},
		{"too-large", func(c *Config) { c.MaxRecvMsgSize = 1 << 10 }, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(large).raw(), resp)
		}, nil},
		{"unknown-service", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, "/no.such.Service/Export", rawBytes(body).raw(), resp)
		}, nil},
		{"unknown-method", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, "/opentelemetry.proto.collector.trace.v1.TraceService/Import", rawBytes(body).raw(), resp)
		}, nil},
		{"busy", func(c *Config) {
			c.Limiter = admission.NewLimiter(admission.LimiterConfig{MaxBytes: 4 << 20, MaxDecodes: 2, Wait: 30 * time.Millisecond})
			c.MaxRecvMsgSize = 4 << 20
			if !c.Limiter.AcquireBytes(admission.IntakeGRPC, 4<<20, nil) {
				panic("cannot fill the limiter")
			}
		}, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(body).raw(), resp)
		}, nil},
		{"tenant", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(metadata.AppendToOutgoingContext(bearer, "X-Scope-OrgID", "acme"), tracesPath, rawBytes(body).raw(), resp)
		}, withTenants(nil)},
		{"tenant-default", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(body).raw(), resp)
		}, withTenants(nil)},
		{"tenant-bad-value", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(metadata.AppendToOutgoingContext(bearer, "x-scope-orgid", strings.Repeat("x", 300)), tracesPath, rawBytes(body).raw(), resp)
		}, withTenants(nil)},
		{"tenant-credential", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tok-beta")
			return e.raw.Invoke(ctx, tracesPath, rawBytes(body).raw(), resp)
		}, withTenants([]tenant.Credential{{Token: "tok-beta", Values: []string{"beta"}}})},
		{"tenant-credential-claim", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tok-beta", "x-scope-orgid", "acme")
			return e.raw.Invoke(ctx, tracesPath, rawBytes(body).raw(), resp)
		}, withTenants([]tenant.Credential{{Token: "tok-beta", Values: []string{"beta"}}})},
		{"ack-upstream", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(body).raw(), resp)
		}, func(t *testing.T, pc *pipeline.Config, sc *Config) *testkit.Recorder {
			pc.Ack, pc.Eager = pipeline.AckUpstream, true
			return nil
		}},
		{"ack-upstream-failed", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(body).raw(), resp)
		}, func(t *testing.T, pc *pipeline.Config, sc *Config) *testkit.Recorder {
			pc.Ack, pc.Eager = pipeline.AckUpstream, true
			rec := testkit.NewRecorder("recorder")
			rec.SetFail(true)
			return rec
		}},
		{"queue-full", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(large).raw(), resp)
		}, func(t *testing.T, pc *pipeline.Config, sc *Config) *testkit.Recorder {
			pc.QueueMaxBytes, pc.BatchMaxBytes = 64<<10, 64<<10
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]result
			for i, tr := range transports {
				sc := DefaultConfig()
				sc.Transport = tr
				sc.AuthTokenFile = tok
				if tc.cfg != nil {
					tc.cfg(&sc)
				}
				pc := testPipelineConfig()
				var rec *testkit.Recorder
				if tc.setup != nil {
					rec = tc.setup(t, &pc, &sc)
				}
				e := start(t, pc, sc, rec)
				var resp coltracev1.ExportTraceServiceResponse
				got[i].st = status.Convert(tc.call(t, e, &resp))
				got[i].resp, _ = resp.MarshalVT()
				e.p.Flush()
				for _, g := range e.rec.Received() {
					got[i].bytes = append(append(got[i].bytes, g.Tenant+":"...), g.Body...)
				}
			}
			if !proto.Equal(got[0].st.Proto(), got[1].st.Proto()) {
				t.Fatalf("grpc-go answered %v %q %v, otlpgate %v %q %v", got[0].st.Code(), got[0].st.Message(), got[0].st.Details(),
					got[1].st.Code(), got[1].st.Message(), got[1].st.Details())
			}
			if !bytes.Equal(got[0].resp, got[1].resp) {
				t.Fatalf("response: grpc-go %x, otlpgate %x", got[0].resp, got[1].resp)
			}
			if !bytes.Equal(got[0].bytes, got[1].bytes) {
				t.Fatalf("destination: grpc-go %d bytes, otlpgate %d bytes", len(got[0].bytes), len(got[1].bytes))
			}
			t.Logf("%v %q, response %x, %d bytes delivered", got[1].st.Code(), got[1].st.Message(), got[1].resp, len(got[1].bytes))
		})
	}
}

// h2Client is a bare client of the own transport: x/net's framer, for the tests that follow
// one connection's frames.
type h2Client struct {
	conn net.Conn
	fr   *http2.Framer
}

func dialH2Client(t *testing.T, addr string) *h2Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &h2Client{conn: conn, fr: http2.NewFramer(conn, conn)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	conn.SetDeadline(time.Now().Add(time.Minute))
	conn.Write([]byte(http2.ClientPreface))
	c.fr.WriteSettings()
	return c
}

// call opens stream id with a v1 traces Export and sends msg, ending the stream when end.
func (c *h2Client) call(t *testing.T, id uint32, msg []byte, end bool) {
	t.Helper()
	block := h2.AppendHeaderBlock(nil, h2.GRPCRequestHeaders("http", "otlpgate", tracesPath, "", "test")...)
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	for {
		n := min(len(msg), h2.DefaultMaxFrameSize)
		if err := c.fr.WriteData(id, end && n == len(msg), msg[:n]); err != nil {
			t.Fatal(err)
		}
		if msg = msg[n:]; len(msg) == 0 {
			return
		}
	}
}

// next returns the next frame that is not SETTINGS or WINDOW_UPDATE, acknowledging SETTINGS.
func (c *h2Client) next(t *testing.T) http2.Frame {
	t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
			continue
		case *http2.WindowUpdateFrame:
			continue
		}
		return f
	}
}

func grpcMessage(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body))), body...)
}

// Shutdown on the own transport is RFC 9113's graceful GOAWAY: a first GOAWAY that admits
// every stream, with a PING; once the client acknowledged it, a GOAWAY with the last stream
// it opened; a call in progress is still admitted and answered, and the connection closes
// once it was; Shutdown then returns without error.
func TestH2ShutdownTwoPhaseGoAway(t *testing.T) {
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	e := start(t, testPipelineConfig(), sc, nil)
	c := dialH2Client(t, e.srv.Addr().String())
	body := traceBody(t, 3, 5)
	msg := grpcMessage(body)
	c.call(t, 1, msg[:10], false) // a call whose message is half sent
	c.fr.WritePing(false, [8]byte{1})
	for f := c.next(t); ; f = c.next(t) {
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			break // the server read the call
		}
	}
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shut <- e.srv.Shutdown(ctx)
	}()
	ga, ok := c.next(t).(*http2.GoAwayFrame)
	if !ok || ga.LastStreamID != 1<<31-1 || ga.ErrCode != http2.ErrCodeNo {
		t.Fatalf("first frame of the shutdown: %v", ga)
	}
	p, ok := c.next(t).(*http2.PingFrame)
	if !ok || p.IsAck() {
		t.Fatalf("after the first GOAWAY: %v, want a PING", p)
	}
	c.fr.WritePing(true, p.Data)
	ga, ok = c.next(t).(*http2.GoAwayFrame)
	if !ok || ga.LastStreamID != 1 || ga.ErrCode != http2.ErrCodeNo {
		t.Fatalf("second GOAWAY: %v", ga)
	}
	// The call in progress goes on: its message ends, and it is answered.
	if err := c.fr.WriteData(1, true, msg[10:]); err != nil {
		t.Fatal(err)
	}
	var status string
	for status == "" {
		if h, ok := c.next(t).(*http2.MetaHeadersFrame); ok && h.StreamEnded() {
			status = h.PseudoValue("status") + " " + h.Fields[len(h.Fields)-1].Name + "=" + h.Fields[len(h.Fields)-1].Value
		}
	}
	if status != "200 grpc-status=0" && status != " grpc-status=0" {
		t.Fatalf("answer %q", status)
	}
	if _, err := c.fr.ReadFrame(); err == nil {
		t.Fatal("the connection stays open after its last call")
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	e.p.Flush()
	if batches, _ := totals(e.rec); !bytes.Equal(bytes.Join(batches, nil), body) {
		t.Fatal("the call's request did not reach the destination")
	}
}

// A connection keeps serving past -grpc.handshake-timeout (which bounds only its preface), and
// one without a call is closed with GOAWAY "max_idle" after -grpc.max-connection-idle.
func TestH2ConnectionDeadlines(t *testing.T) {
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	sc.HandshakeTimeout = 100 * time.Millisecond
	sc.MaxConnectionIdle = 0
	e := start(t, testPipelineConfig(), sc, nil)
	c := dialH2Client(t, e.srv.Addr().String())
	msg := grpcMessage(traceBody(t, 3, 1))
	c.call(t, 1, msg, true)
	time.Sleep(3 * sc.HandshakeTimeout) // the scenario: the time passes
	c.call(t, 3, msg, true)
	ended := 0
	for ended < 2 {
		switch f := c.next(t).(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				ended++
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v after the handshake timeout", f.ErrCode)
		}
	}

	sc.MaxConnectionIdle = 200 * time.Millisecond
	e = start(t, testPipelineConfig(), sc, nil)
	c = dialH2Client(t, e.srv.Addr().String())
	c.call(t, 1, msg, true)
	for {
		f := c.next(t)
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if string(ga.DebugData()) != "max_idle" || ga.LastStreamID != 1 {
				t.Fatalf("GOAWAY %v %q", ga, ga.DebugData())
			}
			break
		}
	}
}

// A client that pings more often than -grpc.keepalive.min-time is told "too_many_pings" with
// ENHANCE_YOUR_CALM on its third early PING, as grpc-go tells it: a PING flood costs at most
// three answers.
func TestH2PingFloodEnds(t *testing.T) {
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	e := start(t, testPipelineConfig(), sc, nil)
	c := dialH2Client(t, e.srv.Addr().String())
	for i := range 1000 {
		if c.fr.WritePing(false, [8]byte{byte(i)}) != nil {
			break
		}
	}
	acks := 0
	for {
		switch f := c.next(t).(type) {
		case *http2.PingFrame:
			acks++
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeEnhanceYourCalm || string(f.DebugData()) != "too_many_pings" || acks != 3 {
				t.Fatalf("GOAWAY %v %q after %d acks", f.ErrCode, f.DebugData(), acks)
			}
			return
		default:
			t.Fatalf("frame %v", f)
		}
	}
}

// Unary calls in a steady flow from several goroutines when shutdown comes: every call
// answered OK reached the destination exactly once, the calls after it are refused, and
// Shutdown returns without error once the calls in progress were answered. On both
// transports.
func TestShutdownUnderUnaryLoad(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			sc := DefaultConfig()
			sc.Transport = tr
			e := start(t, testPipelineConfig(), sc, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const callers, maxCalls = 8, 5_000
			var (
				mu       sync.Mutex
				answered = map[uint64]bool{}
				next     atomic.Uint64
				wg       sync.WaitGroup
				shut     = make(chan error, 1)
				once     sync.Once
			)
			client := coltracev1.NewTraceServiceClient(e.conn)
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						id := next.Add(1)
						if id > maxCalls {
							return
						}
						gen := otlpgen.New(id) // the trace id of call id ends in id
						req := gen.Spans(otlpgen.Shape{Spans: 1, Attrs: 1})
						binary.BigEndian.PutUint64(req.ResourceSpans[0].ScopeSpans[0].Spans[0].TraceId[8:], id)
						if _, err := client.Export(ctx, req); err != nil {
							return // refused once the server shuts down
						}
						mu.Lock()
						answered[id] = true
						if len(answered) == 200 {
							once.Do(func() { go func() { shut <- e.srv.Shutdown(ctx) }() })
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if err := <-shut; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			e.p.Flush()
			delivered := map[uint64]int{}
			for _, g := range e.rec.Received() {
				var req coltracev1.ExportTraceServiceRequest
				if err := req.UnmarshalVT(g.Body); err != nil {
					t.Fatal(err)
				}
				for _, rs := range req.ResourceSpans {
					for _, ss := range rs.ScopeSpans {
						for _, sp := range ss.Spans {
							delivered[binary.BigEndian.Uint64(sp.TraceId[8:])]++
						}
					}
				}
			}
			for id := range answered {
				if delivered[id] != 1 {
					t.Errorf("call %d answered OK, delivered %d times", id, delivered[id])
				}
			}
			if len(answered) >= maxCalls {
				t.Fatalf("every call was answered: the shutdown refused none")
			}
			t.Logf("%d answered, %d delivered", len(answered), len(delivered))
		})
	}
}

// A connection the shutdown reaches before its goroutine wrote the server's preface still
// sends SETTINGS first (RFC 9113 §3.4), then the shutdown's GOAWAY and PING.
func TestH2GoAwayBeforePreface(t *testing.T) {
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	p, err := pipeline.New(testPipelineConfig(), []pipeline.Destination{&testkit.Discard{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := New(sc, p, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.gs.Stop()
	mc := newMemConn()
	c := s.newH2Conn(mc)
	if !s.h2.add(c) {
		t.Fatal("not added")
	}
	c.goAway()
	done := make(chan struct{})
	go func() { defer close(done); c.serve() }()
	<-mc.wrote
	fr := http2.NewFramer(nil, bytes.NewReader(mc.last))
	var types []http2.FrameType
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		types = append(types, f.Header().Type)
	}
	mc.Close()
	<-done
	want := []http2.FrameType{http2.FrameSettings, http2.FrameWindowUpdate, http2.FrameGoAway, http2.FramePing}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("first write %v, want %v", types, want)
	}
}

// The own transport honours the client's windows for its answers: with
// SETTINGS_INITIAL_WINDOW_SIZE 0 a call's answer sends its headers and waits, and its DATA
// and trailers follow the client's WINDOW_UPDATE.
func TestH2AnswerWaitsForWindow(t *testing.T) {
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	e := start(t, testPipelineConfig(), sc, nil)
	c := dialH2Client(t, e.srv.Addr().String())
	c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.call(t, 1, grpcMessage(traceBody(t, 1, 1)), true)
	c.fr.WritePing(false, [8]byte{9})
	var seen []string
	for {
		f := c.next(t)
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			break
		}
		seen = append(seen, f.Header().Type.String())
	}
	if fmt.Sprint(seen) != "[HEADERS]" {
		t.Fatalf("before the window: %v, want the headers only", seen)
	}
	c.fr.WriteWindowUpdate(1, 5)
	d, ok := c.next(t).(*http2.DataFrame)
	if !ok || !bytes.Equal(d.Data(), []byte{0, 0, 0, 0, 0}) {
		t.Fatalf("after the window: %v", d)
	}
	if h, ok := c.next(t).(*http2.MetaHeadersFrame); !ok || !h.StreamEnded() || h.Fields[0].Value != "0" {
		t.Fatalf("trailers: %v", h)
	}
}

// What a call holds is given back however it ends: the intake limiter's reservation and the
// message buffer of a call reset by its client in the middle of its message, or cut off with
// its connection.
func TestH2AbandonedCallsReleaseReservations(t *testing.T) {
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 64 << 20, MaxDecodes: 2, Wait: time.Second})
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	sc.Limiter = lim
	e := start(t, testPipelineConfig(), sc, nil)
	msg := grpcMessage(traceBody(t, 1, 2000))
	held := func(within time.Duration, want int64) bool {
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if lim.Bytes() == want {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	}
	c := dialH2Client(t, e.srv.Addr().String())
	c.call(t, 1, msg[:len(msg)/2], false)
	if !held(10*time.Second, int64(len(msg)-5)) {
		t.Fatalf("limiter holds %d, want the message's %d", lim.Bytes(), len(msg)-5)
	}
	c.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	if !held(10*time.Second, 0) {
		t.Fatalf("limiter holds %d after the reset", lim.Bytes())
	}
	c.call(t, 3, msg[:len(msg)/2], false)
	if !held(10*time.Second, int64(len(msg)-5)) {
		t.Fatalf("limiter holds %d, want the message's %d", lim.Bytes(), len(msg)-5)
	}
	c.conn.Close()
	if !held(10*time.Second, 0) {
		t.Fatalf("limiter holds %d after the connection closed", lim.Bytes())
	}
}

// -grpc.max-connection-age ends a connection as a shutdown does, with the two GOAWAYs, so that
// the client moves to a new one; a call in progress is answered first.
func TestH2MaxConnectionAge(t *testing.T) {
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	sc.MaxConnectionAge = 200 * time.Millisecond
	sc.MaxConnectionAgeGrace = time.Minute
	e := start(t, testPipelineConfig(), sc, nil)
	c := dialH2Client(t, e.srv.Addr().String())
	msg := grpcMessage(traceBody(t, 3, 1))
	c.call(t, 1, msg[:3], false)
	ga, ok := c.next(t).(*http2.GoAwayFrame)
	if !ok || ga.LastStreamID != 1<<31-1 {
		t.Fatalf("at the age: %v", ga)
	}
	p, ok := c.next(t).(*http2.PingFrame)
	if !ok || p.IsAck() {
		t.Fatalf("after the first GOAWAY: %v", p)
	}
	c.fr.WritePing(true, p.Data)
	if ga, ok := c.next(t).(*http2.GoAwayFrame); !ok || ga.LastStreamID != 1 {
		t.Fatalf("second GOAWAY: %v", ga)
	}
	if err := c.fr.WriteData(1, true, msg[3:]); err != nil {
		t.Fatal(err)
	}
	for {
		if h, ok := c.next(t).(*http2.MetaHeadersFrame); ok && h.StreamEnded() {
			break
		}
	}
	if _, err := c.fr.ReadFrame(); err == nil {
		t.Fatal("the connection stays open after its last call")
	}
}

// After -grpc.keepalive.time without a byte from the client the own transport sends a PING; a
// client that answers keeps its connection, one that stays silent past
// -grpc.keepalive.timeout loses it, counted in otlpgate_grpc_keepalive_closed_connections_total.
func TestH2KeepalivePing(t *testing.T) {
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	sc.KeepaliveTime, sc.KeepaliveTimeout = 100*time.Millisecond, 200*time.Millisecond
	e := start(t, testPipelineConfig(), sc, nil)
	before := testutil.ToFloat64(keepaliveCloses)
	silent := dialH2Client(t, e.srv.Addr().String())
	if p, ok := silent.next(t).(*http2.PingFrame); !ok || p.IsAck() {
		t.Fatalf("keepalive: %v", p)
	}
	for {
		if _, err := silent.fr.ReadFrame(); err != nil {
			break // closed
		}
	}
	if got := testutil.ToFloat64(keepaliveCloses) - before; got != 1 {
		t.Fatalf("otlpgate_grpc_keepalive_closed_connections_total rose by %v, want 1", got)
	}
	alive := dialH2Client(t, e.srv.Addr().String())
	for range 3 { // answered each time: the connection stays
		p, ok := alive.next(t).(*http2.PingFrame)
		if !ok || p.IsAck() {
			t.Fatalf("keepalive: %v", p)
		}
		alive.fr.WritePing(true, p.Data)
	}
	alive.call(t, 1, grpcMessage(traceBody(t, 1, 1)), true)
	for {
		switch f := alive.next(t).(type) {
		case *http2.PingFrame:
			alive.fr.WritePing(true, f.Data)
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				return
			}
		}
	}
}

// An OTEP unary call answers the same on both transports: its id and result code (and
// retry_delay_ms), and the same bytes at the destination; the OTEP stream service is
// UNIMPLEMENTED on the own transport.
func TestOTEPUnaryAnswersAlike(t *testing.T) {
	body := traceBody(t, 5, 4)
	const path = "/otlpgate.otep.v1.UnaryExporter/ExportTraces"
	cases := []struct {
		name  string
		req   []byte
		setup func(pc *pipeline.Config, sc *Config) *testkit.Recorder
	}{
		{"valid", otepReq(t, 7, body), nil},
		{"empty", otepReq(t, 8, nil), nil},
		{"invalid", append(otepReq(t, 9, nil), 0x12, 0x50, 0x01), nil},
		{"busy", otepReq(t, 10, body), func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
			sc.Limiter = admission.NewLimiter(admission.LimiterConfig{MaxBytes: 4 << 20, MaxDecodes: 2, Wait: 30 * time.Millisecond})
			sc.MaxRecvMsgSize = 4 << 20
			if !sc.Limiter.AcquireBytes(admission.IntakeGRPC, 4<<20, nil) {
				panic("cannot fill the limiter")
			}
			return nil
		}},
		{"ack-upstream-failed", otepReq(t, 11, body), func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
			pc.Ack, pc.Eager = pipeline.AckUpstream, true
			rec := testkit.NewRecorder("recorder")
			rec.SetFail(true)
			return rec
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var resps [2]*otepv1.ExportResponse
			var sts [2]*status.Status
			var delivered [2][]byte
			for i, tr := range transports {
				sc := DefaultConfig()
				sc.Transport = tr
				pc := testPipelineConfig()
				var rec *testkit.Recorder
				if tc.setup != nil {
					rec = tc.setup(&pc, &sc)
				}
				e := start(t, pc, sc, rec)
				resps[i] = &otepv1.ExportResponse{}
				sts[i] = status.Convert(e.raw.Invoke(context.Background(), path, rawBytes(tc.req).raw(), resps[i]))
				e.p.Flush()
				for _, g := range e.rec.Received() {
					delivered[i] = append(delivered[i], g.Body...)
				}
			}
			if !proto.Equal(resps[0], resps[1]) || !proto.Equal(sts[0].Proto(), sts[1].Proto()) {
				t.Fatalf("grpc-go answered %v %v, otlpgate %v %v", resps[0], sts[0], resps[1], sts[1])
			}
			if !bytes.Equal(delivered[0], delivered[1]) {
				t.Fatalf("destination: grpc-go %d bytes, otlpgate %d", len(delivered[0]), len(delivered[1]))
			}
			t.Logf("%v %v, %d bytes delivered", resps[1], sts[1].Code(), len(delivered[1]))
		})
	}
}

// The HPACK bomb: a client names the newest entry of its dynamic table ten thousand times in
// one block (10 KB on the wire, hundreds of KB decoded, past -grpc.max-header-bytes). The own
// transport counts the list before it copies, resets that stream, keeps its table in step
// (the block's other fields were inserted), and serves the next call on the connection.
func TestH2HeaderListBombRefused(t *testing.T) {
	sc := DefaultConfig()
	sc.Transport = TransportOwn
	e := start(t, testPipelineConfig(), sc, nil)
	c := dialH2Client(t, e.srv.Addr().String())
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	req := func(extra ...hpack.HeaderField) []byte {
		hb.Reset()
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":path", Value: tracesPath}, {Name: ":authority", Value: "otlpgate"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}} {
			enc.WriteField(f)
		}
		for _, f := range extra {
			enc.WriteField(f)
		}
		return append([]byte(nil), hb.Bytes()...)
	}
	msg := grpcMessage(traceBody(t, 1, 1))
	send := func(id uint32, block []byte) {
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := c.fr.WriteData(id, true, msg); err != nil {
			t.Fatal(err)
		}
	}
	refusedBefore := testutil.ToFloat64(headerTooLarge)
	send(1, req(hpack.HeaderField{Name: "x-big", Value: strings.Repeat("b", 4000)})) // inserts the entry
	bomb := append(req(), bytes.Repeat([]byte{0xbe}, 10000)...)                      // index 62: x-big
	send(3, bomb)
	send(5, req())
	ended := map[uint32]string{}
	for len(ended) < 3 {
		switch f := c.next(t).(type) {
		case *http2.RSTStreamFrame:
			ended[f.StreamID] = "rst " + f.ErrCode.String()
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				ended[f.StreamID] = "grpc-status " + f.Fields[len(f.Fields)-1].Value
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v: the connection was not kept", f.ErrCode)
		}
	}
	if ended[1] != "grpc-status 0" || ended[3] != "rst FRAME_SIZE_ERROR" || ended[5] != "grpc-status 0" {
		t.Fatalf("streams ended %v", ended)
	}
	// Counted as on grpc-go's transport.
	if got := testutil.ToFloat64(headerTooLarge) - refusedBefore; got != 1 {
		t.Errorf("otlpgate_grpc_refused_streams_total{reason=\"header_too_large\"} counted %v, want 1", got)
	}
}
