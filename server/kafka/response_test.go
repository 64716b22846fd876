package kafka

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// metadataRequest is a Metadata request (size prefix included) naming topics topics of nameLen
// bytes each.
func metadataRequest(version int16, topics, nameLen int) []byte {
	md := kmsg.NewPtrMetadataRequest()
	md.Version = version
	name := strings.Repeat("t", nameLen)
	for range topics {
		tp := kmsg.NewMetadataRequestTopic()
		tp.Topic = kmsg.StringPtr(name)
		md.Topics = append(md.Topics, tp)
	}
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("big")).AppendRequest(nil, md, 1)
}

// liveHeap is the heap in use once the collector has run (twice: pooled buffers survive one).
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Finding 6: connections that stay open after one large request keep nothing of it. Each of
// 16 clients asks Metadata about 4,000 topics of 200-byte names (800 KB: the request, the
// decoded topics and the answer took about 3 MB per connection, kept until the connection
// closed), then pushes a large compressed payload, reads both answers and stays idle. The live heap grows by a
// small buffer per connection, and so does otlpgate_kafka_buffered_bytes.
func TestIdleConnectionsKeepNoLargeBuffers(t *testing.T) {
	const clients = 16
	cfg := testConfig()
	cfg.MaxConnections = clients + 1
	// The consumer keeps nothing, so that what grows is what the connections keep.
	s, clk := startServer(t, cfg, &testkit.Discard{})
	req := metadataRequest(1, 4000, 200)
	payload := largeZstd(t, 1, 300<<10)
	if len(req) < 800_000 || len(payload) < 100_000 {
		t.Fatalf("request %d bytes, push %d bytes", len(req), len(payload))
	}
	conns := make([]*client, clients)
	for i := range conns {
		conns[i] = dial(t, s, fmt.Sprintf("c%d", i))
	}
	round := func(c *client) {
		t.Helper()
		c.write(req)
		var md kmsg.MetadataResponse
		md.Version = 1
		if err := md.ReadFrom(c.readResponse(1, false)); err != nil || len(md.Topics) != 4000 {
			t.Fatalf("metadata: %d topics, %v", len(md.Topics), err)
		}
		sub := c.get([16]byte{})
		clk.Advance(cfg.DefaultInterval)
		if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 4, payload, false); code != errNone {
			t.Fatalf("push: code %d", code)
		}
	}
	// One round first, so that the pools and their reserves hold what the requests need.
	round(dial(t, s, "warm-up"))
	base := liveHeap()
	baseBuffered := buffered.Load()
	for _, c := range conns {
		round(c)
	}
	grown := int64(liveHeap()) - int64(base)
	held := buffered.Load() - baseBuffered
	t.Logf("%d idle connections after an %d-byte Metadata and a %d-byte push each: live heap +%d bytes, buffered +%d bytes",
		clients, len(req), len(payload), grown, held)
	// The instances and their labels, and what the pool keeps through collections (at most one
	// buffer of the tiers above 64 KiB), account for the rest.
	if grown > 4<<20 {
		t.Fatalf("idle connections hold %d bytes", grown)
	}
	if held > clients*1024 {
		t.Fatalf("otlpgate_kafka_buffered_bytes grew by %d", held)
	}
}

// pipeConn serves a connection of s over net.Pipe, which buffers nothing: a response the
// client does not read stays in the server's hands.
func pipeConn(t *testing.T, s *Server) (net.Conn, chan struct{}) {
	t.Helper()
	a, b := net.Pipe()
	c := newConn(s, a)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.serve()
		a.Close()
		c.closeOut()
	}()
	t.Cleanup(func() {
		b.Close()
		a.Close()
		<-done
	})
	return b, done
}

// A large answer holds limiter bytes and counts as buffered for as long as its client leaves it
// unread, and one that finds the limiter full is not written: its connection is closed,
// counted. Reading the answer gives everything back.
func TestUnreadLargeResponsesBounded(t *testing.T) {
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 1 << 20, UnauthenticatedMaxBytes: 1 << 20, Wait: 100 * time.Millisecond})
	cfg := testConfig()
	// Within the 1 MiB budget, as Validate asks: a request and a decompression buffer fit.
	cfg.MaxRequestBytes, cfg.TelemetryMaxBytes = 512<<10, 256<<10
	cfg.Limiter = lim
	s, err := New(cfg, &testkit.Recorder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(t.Context())
	base := buffered.Load()

	// 10,000 topics of 38 bytes: a 400 KB request, a 700 KB answer, a 1 MiB buffer.
	big := metadataRequest(1, 10000, 38)
	a, _ := pipeConn(t, s)
	go a.Write(big)
	testkit.WaitFor(t, "the answer to hold the limiter", func() bool { return lim.Bytes() == 1<<20 })
	if b := buffered.Load() - base; b < 1<<20 {
		t.Fatalf("an unread 1 MiB answer counts %d buffered bytes", b)
	}

	// 8,000 topics without names: a 16 KB request, which takes nothing from the limiter, and
	// an answer of more than 16 KiB, which finds it full.
	small := metadataRequest(1, 8000, 0)
	if len(small) > smallBufSize {
		t.Fatalf("small request of %d bytes", len(small))
	}
	refused := counterValue(t, refusedResponses)
	b, bDone := pipeConn(t, s)
	go b.Write(small)
	<-bDone
	if d := counterValue(t, refusedResponses) - refused; d != 1 {
		t.Fatalf("refused responses counted %v, want 1", d)
	}
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("refused connection: read %v, want EOF", err)
	}

	// The first client reads its answer: the bytes come back, the buffer goes.
	var size [4]byte
	if _, err := io.ReadFull(a, size[:]); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(a, resp); err != nil {
		t.Fatal(err)
	}
	var md kmsg.MetadataResponse
	md.Version = 1
	if err := md.ReadFrom(resp[4:]); err != nil || len(md.Topics) != 10000 {
		t.Fatalf("answer: %d topics, %v", len(md.Topics), err)
	}
	testkit.WaitFor(t, "the limiter to be given back", func() bool { return lim.Bytes() == 0 })
	testkit.WaitFor(t, "the buffer to go", func() bool { return buffered.Load()-base <= 1024 })
}
