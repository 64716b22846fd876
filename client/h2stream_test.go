package client

import (
	"bytes"
	"crypto/tls"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// rawStreamConfig is an OTEP stream destination on the own transport with one stream per
// signal and a window of window requests.
func rawStreamConfig(t testing.TB, addr string, window int) Config {
	return streamConfigOn(t, TransportOtlpgate, addr, 1, window)
}

// checkRaw verifies that every request the raw upstream read carried id k with batch b<k-1>,
// byte for byte.
func checkRaw(t *testing.T, f *feeder, got []rawGot) {
	t.Helper()
	for _, g := range got {
		if want := "b" + strconv.Itoa(int(g.id)-1); g.tag != want {
			t.Errorf("connection %d stream %d: id %d carried %q, want %q", g.conn, g.stream, g.id, g.tag, want)
			continue
		}
		if !bytes.Equal(g.body, f.body(g.tag)) {
			t.Errorf("id %d: body differs from the batch's payload", g.id)
		}
	}
}

// rawIDs lists the ids read on connection conn (0: all), sorted.
func rawIDs(got []rawGot, conn int) []uint64 {
	var out []uint64
	for _, g := range got {
		if conn == 0 || g.conn == conn {
			out = append(out, g.id)
		}
	}
	slices.Sort(out)
	return out
}

// rawStreams lists the streams, by connection and id, each request was read on.
func rawStreams(got []rawGot) map[[2]uint64][]uint64 {
	m := map[[2]uint64][]uint64{}
	for _, g := range got {
		k := [2]uint64{uint64(g.conn), uint64(g.stream)}
		m[k] = append(m[k], g.id)
	}
	return m
}

// An upstream goes away in the middle of a stream with requests unanswered. Two requests were
// answered, four are pending (a full window), then: "close", GOAWAY naming the stream as
// processed and the connection closed; "refused", GOAWAY naming no stream (the four were not
// processed) and nothing answered any more; "reset", RST_STREAM(CANCEL) of the stream on a
// connection that stays. Every time, the two answered requests are never sent again, the
// four pending ones go again with their ids (counted as re-sent, as on grpc-go's path) on a
// new stream, of a new connection but for "reset", and everything is delivered.
func TestH2StreamCutMidStream(t *testing.T) {
	for _, c := range []struct {
		name  string
		cut   rawCut
		conns int
	}{{"close", cutGoAwayClose, 2}, {"refused", cutGoAwayRefuse, 2}, {"reset", cutReset, 1}} {
		t.Run(c.name, func(t *testing.T) {
			const n, window = 10, 4
			u := newRawStreamUpstream(t, true)
			u.answerFirst, u.cutAt, u.cut = 2, 6, c.cut
			u.start()
			d := startDest(t, rawStreamConfig(t, u.addr(), window))
			f := newFeeder(t, d)
			f.send(0, n, 2, 300)
			if ok := f.waitAll(); !allTrue(ok) {
				t.Fatalf("delivered %v", ok)
			}
			got := u.got()
			checkRaw(t, f, got)
			u.checkViolations()
			want := []uint64{1, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 8, 9, 10}
			if ids := rawIDs(got, 0); !slices.Equal(ids, want) {
				t.Fatalf("ids read %v, want %v: the answered ones once, the four pending twice", ids, want)
			}
			first := []uint64{1, 2, 3, 4, 5, 6}
			if c.conns == 2 {
				if ids := rawIDs(got, 1); !slices.Equal(ids, first) {
					t.Errorf("first connection read %v, want %v", ids, first)
				}
				if ids := rawIDs(got, 2); !slices.Equal(ids, seq(3, n)) {
					t.Errorf("second connection read %v, want 3..%d", ids, n)
				}
			}
			streams := rawStreams(got)
			if len(streams) != 2 {
				t.Errorf("streams %v, want two", streams)
			}
			u.mu.Lock()
			conns := u.mu.conns
			u.mu.Unlock()
			if conns != c.conns {
				t.Errorf("%d connections, want %d", conns, c.conns)
			}
			if r, a := value(d.m.resent), value(d.m.ackedRequests); r != 4 || a != n {
				t.Errorf("resent %d, acknowledged %d; want 4, %d", r, a, n)
			}
			if v := value(d.m.streamsEnded[endBroken]); v != 1 {
				t.Errorf("broken streams %d, want 1", v)
			}
			if err := shutdown(t, d, waitFor); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An upstream that goes silent in the middle of a stream (it reads on, and answers nothing,
// PINGs neither): the keepalive ping, sent while the stream is open, goes unanswered and the
// connection is closed long before the ack timeout; the four requests pending go again on a new
// connection, the two answered never.
func TestH2StreamKeepaliveClosesSilentConnection(t *testing.T) {
	const n, window = 10, 4
	u := newRawStreamUpstream(t, true)
	u.answerFirst, u.cutAt, u.cut = 2, 6, cutSilent
	u.start()
	d, err := New(rawStreamConfig(t, u.addr(), window), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Below what Validate allows (10s), which only bounds the operator's setting.
	d.cfg.KeepaliveTime, d.cfg.KeepaliveTimeout = 50*time.Millisecond, 50*time.Millisecond
	d.Start()
	defer shutdown(t, d, waitFor)
	f := newFeeder(t, d)
	f.send(0, n, 1, 100)
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	got := u.got()
	checkRaw(t, f, got)
	want := []uint64{1, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 8, 9, 10}
	if ids := rawIDs(got, 0); !slices.Equal(ids, want) {
		t.Fatalf("ids read %v, want %v", ids, want)
	}
	if r, a := value(d.m.resent), value(d.m.ackTimeouts); r != 4 || a != 0 {
		t.Errorf("resent %d, ack timeouts %d; want 4, 0", r, a)
	}
}

// A graceful GOAWAY in the middle of a stream: the stream the server keeps serving carries
// on until it is re-balanced (every five requests), and the next stream opens on a new
// connection; the old connection closes once its stream ended. Nothing is sent twice.
func TestH2StreamGracefulGoAway(t *testing.T) {
	const n = 10
	u := newRawStreamUpstream(t, true)
	u.cutAt, u.cut = 3, cutGoAwayGraceful
	u.start()
	cfg := rawStreamConfig(t, u.addr(), 8)
	cfg.RebalanceRequests = 5
	d := startDest(t, cfg)
	f := newFeeder(t, d)
	// The GOAWAY comes before the third answer: once that is in, the client knows of it.
	f.send(0, 3, 1, 100)
	for i := range 3 {
		if !f.wait(i) {
			t.Fatalf("batch %d not delivered", i)
		}
	}
	f.send(3, n-3, 1, 100)
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	got := u.got()
	checkRaw(t, f, got)
	u.checkViolations()
	if ids := rawIDs(got, 1); !slices.Equal(ids, seq(1, 5)) {
		t.Errorf("first connection read %v, want 1..5", ids)
	}
	if ids := rawIDs(got, 2); !slices.Equal(ids, seq(6, n)) {
		t.Errorf("second connection read %v, want 6..%d", ids, n)
	}
	if r := value(d.m.resent); r != 0 {
		t.Errorf("resent %d, want 0", r)
	}
	u.mu.Lock()
	conns := u.mu.conns
	u.mu.Unlock()
	if conns != 2 {
		t.Errorf("%d connections, want 2", conns)
	}
}

// The server holds every stream to a window of 1000 bytes: requests of 20 KiB and one of
// 200 KiB (over the connection's window too) go in pieces as the server credits what it
// read, never past a window, and arrive whole.
func TestH2StreamSmallWindow(t *testing.T) {
	u := newRawStreamUpstream(t, true)
	u.window = 1000
	u.start()
	d := startDest(t, rawStreamConfig(t, u.addr(), 4))
	f := newFeeder(t, d)
	f.send(0, 6, 4, 5000)
	f.send(6, 1, 40, 5000)
	if ok := f.waitAll(); !allTrue(ok) {
		t.Fatalf("delivered %v", ok)
	}
	got := u.got()
	checkRaw(t, f, got)
	u.checkViolations()
	if ids := rawIDs(got, 0); !slices.Equal(ids, seq(1, 7)) {
		t.Errorf("ids %v, want 1..7 once each", ids)
	}
	u.mu.Lock()
	maxData := u.mu.maxData
	u.mu.Unlock()
	if maxData > 1000 {
		t.Errorf("a DATA frame of %d bytes, past the window of 1000", maxData)
	}
}

// OTEP streams of the own transport over TLS (ALPN h2, a client certificate), compressed with
// gzip and zstd, to a grpc-go upstream that requires the certificate and answers compressed:
// every request arrives once with its id and exact bytes, each stream with its grpc-encoding,
// and the compressed answers are read (all acknowledged).
func TestH2StreamTLSCompressed(t *testing.T) {
	c := newCerts(t)
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{c.server}, ClientCAs: c.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	for _, enc := range []string{"gzip", "zstd"} {
		t.Run(enc, func(t *testing.T) {
			const n = 12
			u := newUpstream(t, grpc.Creds(creds))
			base := testConfig(t, "")
			spec := "name=" + base.Name + ",endpoint=" + u.addr + ",protocol=otep,mode=stream,streams=2,window=4,rebalance-requests=5,transport=otlpgate" +
				",compression=" + enc + ",tls-ca=" + c.caFile + ",tls-cert=" + c.clientCert + ",tls-key=" + c.clientKey +
				",tls-server-name=gateway.test"
			cfg, err := ParseDest(spec, base)
			if err != nil {
				t.Fatal(err)
			}
			d := startDest(t, cfg)
			f := newFeeder(t, d)
			f.send(0, n, 3, 1500)
			if ok := f.waitAll(); !allTrue(ok) {
				t.Fatalf("delivered %v", ok)
			}
			got := u.received()
			if !slices.Equal(ids(got), seq(1, n)) {
				t.Fatalf("ids %v, want 1..%d once each", ids(got), n)
			}
			checkIDs(t, f, got)
			u.checkViolations()
			u.mu.Lock()
			encs := slices.Clone(u.compressed)
			u.mu.Unlock()
			if len(encs) < 2 || slices.ContainsFunc(encs, func(e string) bool { return e != enc }) {
				t.Errorf("grpc-encoding of the streams %v, want %s on each", encs, enc)
			}
			if a := value(d.m.ackedRequests); a != n {
				t.Errorf("acknowledged %d, want %d", a, n)
			}
		})
	}
}
