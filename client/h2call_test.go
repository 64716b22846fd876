package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/strictsink"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
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

// transport=otlpgate takes every gRPC destination (v1, OTEP unary and streams) and refuses,
// by name, the others.
func TestH2TransportValidate(t *testing.T) {
	for _, c := range []struct{ dest, want string }{
		{"protocol=v1,transport=otlpgate", ""},
		{"protocol=v1,transport=grpc-go", ""},
		{"protocol=v1,transport=quic", `transport "quic" (want grpc-go or otlpgate)`},
		{"protocol=otep,mode=stream,transport=otlpgate", ""},
		{"protocol=otep,mode=unary,transport=otlpgate", ""},
		{"protocol=otep,mode=stream,streams=4,window=8,rebalance-requests=10,transport=otlpgate", ""},
		{"protocol=v1,transport=otlpgate,tls=true", ""},
		{"protocol=v1,transport=otlpgate,compression=gzip", ""},
		{"protocol=v1,transport=otlpgate,forward-headers=x-tenant", ""},
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

// transports runs f for a destination on each gRPC transport: the own one must treat an
// upstream exactly as grpc-go does.
func transports(t *testing.T, f func(t *testing.T, transport string)) {
	for _, tr := range []string{TransportGRPCGo, TransportOtlpgate} {
		t.Run(tr, func(t *testing.T) { f(t, tr) })
	}
}

// Statuses of v1 calls, each decided as grpc-go's are: INVALID_ARGUMENT and RESOURCE_EXHAUSTED
// without RetryInfo are rejected (counted), UNAVAILABLE is retried after the backoff,
// UNAVAILABLE with RetryInfo pauses the destination for its delay and is sent again; every
// other batch is delivered once, and partial successes are counted.
func TestH2ResultCodes(t *testing.T) {
	transports(t, func(t *testing.T, transport string) {
		u := newUpstream(t)
		u.v1Rejected = 1
		seen := map[string]int{}
		var throttledAt, resentAt time.Time
		u.onUnary = func(g received) (otepv1.ResultCode, error) {
			u.mu.Lock()
			seen[g.tag]++
			k := seen[g.tag]
			if g.tag == "b3" && k == 1 {
				throttledAt = time.Now()
			} else if g.tag == "b3" {
				resentAt = time.Now()
			}
			u.mu.Unlock()
			switch {
			case g.tag == "b1":
				return 0, status.Error(codes.InvalidArgument, "bad")
			case g.tag == "b2" && k == 1:
				return 0, status.Error(codes.Unavailable, "blip")
			case g.tag == "b3" && k == 1:
				return 0, throttleErr(300 * time.Millisecond)
			case g.tag == "b4":
				return 0, status.Error(codes.ResourceExhausted, "too big, no RetryInfo")
			}
			return 0, nil
		}
		cfg := unaryConfig(t, u.addr, ProtocolV1, 1)
		cfg.Transport = transport
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 6, 1, 10)
		if got, want := f.waitAll(), []bool{true, false, true, true, false, true}; !slices.Equal(got, want) {
			t.Fatalf("delivered %v, want %v", got, want)
		}
		want := map[string]int{"b0": 1, "b1": 1, "b2": 2, "b3": 2, "b4": 1, "b5": 1}
		if c := count(u.tags()); !mapsEqual(c, want) {
			t.Errorf("calls per batch %v, want %v", c, want)
		}
		for _, g := range u.received() {
			if !bytes.Equal(g.body, f.body(g.tag)) {
				t.Errorf("%s: body differs", g.tag)
			}
		}
		if r, x, th := value(d.m.retried[RetryFailed]), value(d.m.dropped[DropRejected]), value(d.m.throttles); r != 1 || x != 2 || th != 1 {
			t.Errorf("retried %d, rejected %d, throttles %d; want 1, 2, 1", r, x, th)
		}
		if gap := resentAt.Sub(throttledAt); gap < 300*time.Millisecond {
			t.Errorf("the throttled batch went again after %v, before the RetryInfo delay of 300ms", gap)
		}
		if v := value(d.m.partialRejected); v != 4 {
			t.Errorf("partially rejected %d, want 4 (one per delivered batch)", v)
		}
	})
}

// An upstream that takes a call and never answers: the call is given up after ack-timeout and
// retried after the backoff, as with grpc-go, and nothing is dropped.
func TestH2AckTimeout(t *testing.T) {
	transports(t, func(t *testing.T, transport string) {
		u := newUpstream(t)
		release := make(chan struct{})
		defer close(release)
		var calls atomic.Int32
		u.onUnary = func(g received) (otepv1.ResultCode, error) {
			if g.tag == "b1" && calls.Add(1) == 1 {
				<-release // the first call is never answered in time
			}
			return 0, nil
		}
		cfg := unaryConfig(t, u.addr, ProtocolV1, 1)
		cfg.Transport = transport
		cfg.AckTimeout = time.Second
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 3, 1, 10)
		if got := f.waitAll(); !allTrue(got) {
			t.Fatalf("delivered %v, want all", got)
		}
		if c := count(u.tags()); c["b0"] != 1 || c["b1"] != 2 || c["b2"] != 1 {
			t.Errorf("calls per batch %v, want b1 twice, the others once", c)
		}
		if r, a := value(d.m.retried[RetryAckTimeout]), value(d.m.ackTimeouts); r != 1 || a != 1 {
			t.Errorf("retried after a timeout %d, ack timeouts %d; want 1, 1", r, a)
		}
		if n := dropsOf(d); n != 0 {
			t.Errorf("%d requests dropped", n)
		}
	})
}

// A large batch crosses many DATA frames and many rounds of window: the upstream advertises
// grpc-go's least windows (64KiB per stream and connection) and the default MAX_FRAME_SIZE of
// 16KiB, and gets every byte of each batch, from several calls at once, exactly once.
func TestH2SmallWindows(t *testing.T) {
	u := newUpstream(t, grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10))
	cfg := unaryConfig(t, u.addr, ProtocolV1, 3)
	cfg.Transport = TransportOtlpgate
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(0, 6, 200, 5000) // about 1MiB each
	if got := f.waitAll(); !allTrue(got) {
		t.Fatalf("delivered %v, want all", got)
	}
	if c := count(u.tags()); len(c) != 6 || len(u.tags()) != 6 {
		t.Errorf("calls per batch %v, want b0..b5 once each", c)
	}
	for _, g := range u.received() {
		if len(g.body) < 900<<10 || !bytes.Equal(g.body, f.body(g.tag)) {
			t.Errorf("%s: body of %d bytes differs from the %d sent", g.tag, len(g.body), len(f.body(g.tag)))
		}
	}
}

// The upstream stops gracefully (grpc-go's GracefulStop: GOAWAY, then it finishes the calls it
// has) while calls are in flight, and a new server takes the address: the calls the old one
// kept are answered there once they are let go, the later ones are delivered meanwhile (by the
// old server before its GOAWAY reached the client, by the new one after), and each batch
// arrives exactly once, nothing dropped.
func TestH2GoAwayMidTraffic(t *testing.T) {
	transports(t, func(t *testing.T, transport string) {
		const held, later = 3, 20
		u := newUpstream(t)
		hold := make(chan struct{})
		heldTags := map[string]bool{"b0": true, "b1": true, "b2": true}
		u.onUnary = func(g received) (otepv1.ResultCode, error) {
			if heldTags[g.tag] {
				<-hold
			}
			return 0, nil
		}
		cfg := unaryConfig(t, u.addr, ProtocolV1, held+2) // two workers free for the later calls
		cfg.Transport = transport
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, held, 1, 10)
		u.waitUntil("the calls in flight", func() bool { return u.inCall == held })

		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			u.srv.GracefulStop()
		}()
		next := &upstream{t: t, addr: u.addr, changed: make(chan struct{})}
		next.serve(listenAgain(t, u.addr))
		t.Cleanup(next.stop)
		f.send(held, later, 1, 10)
		for i := held; i < held+later; i++ {
			if !f.wait(i) {
				t.Fatalf("batch %d was not delivered", i)
			}
		}
		close(hold)
		<-stopped

		if got := f.waitAll(); !allTrue(got) {
			t.Fatalf("delivered %v, want all", got)
		}
		tags := append(u.tags(), next.tags()...)
		slices.Sort(tags)
		want := tagList(0, held+later-1)
		slices.Sort(want)
		if !slices.Equal(tags, want) {
			t.Errorf("the upstreams got %v, want %v once each", tags, want)
		}
		t.Logf("at the old server %d, at the new one %d, sent again on a new connection %d",
			len(u.tags()), len(next.tags()), value(d.m.unprocessed))
		if n := dropsOf(d); n != 0 {
			t.Errorf("%d requests dropped", n)
		}
	})
}

// A server that sends GOAWAY naming a lower stream than a call it received (it did not and
// will not process that one): the call goes again at once on a new connection, counted as
// sent again, and each batch is answered exactly once.
func TestH2GoAwayAboveLastStreamResent(t *testing.T) {
	u := newRawUpstream(t, true, 2)
	cfg := unaryConfig(t, u.addr(), ProtocolV1, 2)
	cfg.Transport = TransportOtlpgate
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(0, 2, 1, 10)
	if got := f.waitAll(); !allTrue(got) {
		t.Fatalf("delivered %v, want all", got)
	}
	if got := u.tags(); !mapsEqual(got, map[string]int{"b0": 1, "b1": 1}) {
		t.Errorf("answered %v, want b0 and b1 once each", got)
	}
	if r, c, x := value(d.m.unprocessed), u.conns(), value(d.m.retried[RetryFailed]); r != 1 || c != 2 || x != 0 || value(d.m.resent) != 0 {
		t.Errorf("sent again unprocessed %d (as possible duplicates %v), connections %d, retried after a backoff %d; want 1 (0), 2, 0", r, value(d.m.resent), c, x)
	}
	if n := dropsOf(d); n != 0 {
		t.Errorf("%d requests dropped", n)
	}
}

// Compressed calls (gzip, zstd): the strict upstream decodes exactly what was sent, and every
// call carries its grpc-encoding; the answers, which grpc-go compresses the same way, are read
// (their partial successes counted).
func TestH2Compression(t *testing.T) {
	for _, enc := range []string{"gzip", "zstd"} {
		t.Run(enc, func(t *testing.T) {
			s := startStrict(t)
			cfg := h2Config(t, s.Addr())
			cfg.Compression = enc
			d := startDest(t, cfg)
			f := newFeeder(t, d)
			checkExact(t, f, s, sendThreeSignals(f, 10, 500))

			u := newUpstream(t)
			u.v1Rejected = 1
			cfg = h2Config(t, u.addr)
			cfg.Compression = enc
			d = startDest(t, cfg)
			f = newFeeder(t, d)
			f.send(0, 5, 2, 300)
			if got := f.waitAll(); !allTrue(got) {
				t.Fatalf("delivered %v, want all", got)
			}
			for _, g := range u.received() {
				if !bytes.Equal(g.body, f.body(g.tag)) {
					t.Errorf("%s: body differs", g.tag)
				}
			}
			u.mu.Lock()
			encs := slices.Clone(u.compressed)
			u.mu.Unlock()
			if len(encs) != 5 || slices.ContainsFunc(encs, func(e string) bool { return e != enc }) {
				t.Errorf("grpc-encoding of the calls %v, want %s five times", encs, enc)
			}
			if v := value(d.m.partialRejected); v != 5 {
				t.Errorf("partially rejected %d, want 5 (read from compressed answers)", v)
			}
		})
	}
}

// TLS with ALPN h2, a client certificate and a bearer token, to a grpc-go upstream that
// requires the certificate: calls are delivered with the token; without the certificate the
// handshake fails, the batch is retried until its budget ends, and the upstream sees nothing.
func TestH2TLS(t *testing.T) {
	c := newCerts(t)
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{c.server}, ClientCAs: c.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	u := newUpstream(t, grpc.Creds(creds))
	var auth []string
	u.srvCtxHook = func(md metadata.MD) {
		u.mu.Lock()
		auth = append(auth, strings.Join(md.Get("authorization"), ","))
		u.mu.Unlock()
	}
	base := testConfig(t, "")
	spec := "name=" + base.Name + ",endpoint=" + u.addr + ",protocol=v1,mode=unary,concurrency=1,transport=otlpgate" +
		",tls-ca=" + c.caFile + ",tls-cert=" + c.clientCert + ",tls-key=" + c.clientKey +
		",tls-server-name=gateway.test,bearer-token-file=" + c.tokenF
	cfg, err := ParseDest(spec, base)
	if err != nil {
		t.Fatal(err)
	}
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	f.send(0, 2, 1, 10)
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	u.mu.Lock()
	if len(auth) != 2 || auth[0] != "Bearer s3cret" || auth[1] != "Bearer s3cret" {
		t.Errorf("authorization metadata %q", auth)
	}
	u.mu.Unlock()
	for _, g := range u.received() {
		if !bytes.Equal(g.body, f.body(g.tag)) {
			t.Errorf("%s: body differs", g.tag)
		}
	}

	noCert := cfg
	noCert.Name += "_nocert"
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	noCert.RetryMaxElapsed = 200 * time.Millisecond
	d2 := startDest(t, noCert)
	f2 := newFeeder(t, d2)
	f2.send(10, 1, 1, 10)
	if f2.wait(0) {
		t.Error("delivered without a client certificate")
	}
	if n := len(u.received()); n != 2 {
		t.Errorf("upstream received %d requests, want the 2 sent with a certificate", n)
	}
}

// An upstream that goes silent altogether (it takes the connection and bytes and never writes
// a frame, no SETTINGS, no PING answer): the keepalive ping goes unanswered and the
// connection is closed, failing its open call as UNAVAILABLE, retryable, without waiting for
// the call's ack timeout.
func TestH2KeepaliveClosesSilentConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c) // reads everything, answers nothing
	}()
	cfg := h2Config(t, ln.Addr().String())
	// Below what Validate allows (10s), which only bounds the operator's setting.
	cfg.KeepaliveTime, cfg.KeepaliveTimeout = 50*time.Millisecond, 50*time.Millisecond
	tr, err := newH2Transport(&cfg, [fastpath.NumSignals]string{"/a/A", "/b/B", "/c/C"})
	if err != nil {
		t.Fatal(err)
	}
	// Dialled by hand: the transport waits for the server's SETTINGS, which never come.
	c, err := dialH2(cfg.Endpoint, &cfg, nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	go c.readLoop()
	defer func() { <-c.done }()
	st := newH2Stream()
	if !c.open(st, tr.headers[fastpath.Traces], nil) {
		t.Fatal("the connection took no stream")
	}
	c.writeData(st, traceBody("k", 1, 10), false)
	<-st.done // no ack timeout here: only the keepalive can end the call
	_, err = st.result(nil, cfg.MaxRecvMsgSize)
	if v, _ := classify(err, false); v != verdictRetry || status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "keepalive") {
		t.Fatalf("the call ended with %v, want UNAVAILABLE from the keepalive, retryable", err)
	}
	if c.usable() {
		t.Error("the connection is still used for new calls")
	}
}

// The upstream crashes with calls in flight and comes back on the same address: the calls
// fail as UNAVAILABLE, are retried after the backoff on a new connection, and every batch is
// delivered; the upstream saw each twice (the first attempt reached it).
func TestH2UpstreamRestart(t *testing.T) {
	transports(t, func(t *testing.T, transport string) {
		const n = 2
		u := newUpstream(t)
		hold := make(chan struct{})
		defer close(hold)
		var mu sync.Mutex
		seen := map[string]int{}
		u.onUnary = func(g received) (otepv1.ResultCode, error) {
			mu.Lock()
			seen[g.tag]++
			first := seen[g.tag] == 1
			mu.Unlock()
			if first {
				<-hold // answered never: the server goes away first
			}
			return 0, nil
		}
		cfg := unaryConfig(t, u.addr, ProtocolV1, n)
		cfg.Transport = transport
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, n, 1, 10)
		u.waitUntil("the calls in flight", func() bool { return u.inCall == n })
		u.restart()
		if got := f.waitAll(); !allTrue(got) {
			t.Fatalf("delivered %v, want all", got)
		}
		if c := count(u.tags()); !mapsEqual(c, map[string]int{"b0": 2, "b1": 2}) {
			t.Errorf("calls per batch %v, want b0 and b1 twice", c)
		}
		if r := value(d.m.retried[RetryFailed]); r != n {
			t.Errorf("retried %d, want %d", r, n)
		}
		if x := dropsOf(d); x != 0 {
			t.Errorf("%d requests dropped", x)
		}
	})
}

// RST_STREAM ends a call with its code, as grpc-go maps them: REFUSED_STREAM (the server did
// not process it) sends it again at once, counted; INTERNAL_ERROR is INTERNAL, which a unary
// call does not retry (classify); CANCEL is CANCELLED, retried after the backoff.
func TestH2RSTStream(t *testing.T) {
	for _, c := range []struct {
		code                     http2.ErrCode
		delivered                bool
		resent, retried, dropped int
		answered                 map[string]int
	}{
		{http2.ErrCodeRefusedStream, true, 1, 0, 0, map[string]int{"b0": 1}},
		{http2.ErrCodeInternal, false, 0, 0, 1, map[string]int{}},
		{http2.ErrCodeCancel, true, 0, 1, 0, map[string]int{"b0": 1}},
	} {
		t.Run(c.code.String(), func(t *testing.T) {
			u := newRawUpstreamReset(t, true, 0, c.code)
			cfg := unaryConfig(t, u.addr(), ProtocolV1, 1)
			cfg.Transport = TransportOtlpgate
			d := startDest(t, cfg)
			f := newFeeder(t, d)
			f.send(0, 1, 1, 10)
			if got := f.wait(0); got != c.delivered {
				t.Fatalf("delivered %v, want %v", got, c.delivered)
			}
			if got := u.tags(); !mapsEqual(got, c.answered) {
				t.Errorf("answered %v, want %v", got, c.answered)
			}
			if r, x, dr := value(d.m.unprocessed), value(d.m.retried[RetryFailed]), dropsOf(d); r != c.resent || x != c.retried || dr != c.dropped {
				t.Errorf("sent again %d, retried %d, dropped %d; want %d, %d, %d", r, x, dr, c.resent, c.retried, c.dropped)
			}
		})
	}
}

// A balanced destination (resolver=static) on the own transport: each backend of the fleet is
// a destination with its own connection, traces stay whole on one gateway, every span the SDK
// saw acknowledged arrives once.
func TestH2Fleet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	a := newArrivals()
	var addrs []string
	var gws []*fleetGateway
	for i := range 3 {
		g := startFleetGateway(t, fmt.Sprint("gw", i), a)
		gws = append(gws, g)
		addrs = append(addrs, g.addr)
	}
	cfg := fleetConfig(t, "fleet_h2")
	cfg.Protocol, cfg.Mode, cfg.Transport, cfg.Concurrency = ProtocolV1, ModeUnary, TransportOtlpgate, 2
	cfg.Resolver, cfg.Endpoints = ResolverStatic, addrs
	e := startFleetEdge(t, cfg)
	s := newSDK(t, ctx, e.addr)
	for range 4 {
		s.emit(t, ctx, "run", 50, 5)
	}
	if err := s.tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	e.stop(t)
	stopAll(gws...)
	if dups := a.check(t, s, 1000, "run"); dups != 0 {
		t.Errorf("%d duplicates without any failure", dups)
	}
	per := a.gatewaysOf("run")
	for i := range 3 {
		if per[fmt.Sprint("gw", i)] == 0 {
			t.Errorf("gw%d got no trace: %v", i, per)
		}
	}
}
