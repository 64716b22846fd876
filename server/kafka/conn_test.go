package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"testing/iotest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/pool"
)

// TestClosingRequests sends requests that must close the connection without an answer and
// checks the counter that records each.
func TestClosingRequests(t *testing.T) {
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	encode := func(r kmsg.Request) []byte {
		return (&kmsg.RequestFormatter{}).AppendRequest(nil, r, 7)
	}
	getV1 := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	getV1.Version = 1
	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 9
	badClientID := encode(kmsg.NewPtrGetTelemetrySubscriptionsRequest())
	binary.BigEndian.PutUint16(badClientID[12:], 500) // client id longer than the request
	shortBody := encode(kmsg.NewPtrPushTelemetryRequest())
	shortBody = frame(shortBody[4 : len(shortBody)-3])

	cases := []struct {
		name    string
		bytes   []byte
		counter prometheus.Collector
	}{
		{"over max request bytes", binary.BigEndian.AppendUint32(nil, 64<<10+1), badTooLarge},
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xffffff00), badTooLarge},
		{"under a header", frame([]byte{0, 18, 0}), badTooLarge},
		{"unsupported key", encode(produce), badUnsupported},
		{"unsupported version", encode(getV1), badUnsupported},
		{"unknown key", frame([]byte{0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff}), badUnsupported},
		{"client id past the end", badClientID, badMalformed},
		{"truncated body", shortBody, badMalformed},
	}
	cfg := testConfig()
	cfg.TelemetryMaxBytes = 1024
	cfg.MaxRequestBytes = 64 << 10
	s, _ := startServer(t, cfg, &testkit.Recorder{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s, "x")
			before := counterValue(t, tc.counter)
			c.write(tc.bytes)
			c.expectClosed()
			if got := counterValue(t, tc.counter) - before; got != 1 {
				t.Fatalf("counter moved by %v, want 1", got)
			}
		})
	}
}

func TestApiVersions(t *testing.T) {
	s, _ := startServer(t, testConfig(), &testkit.Recorder{})
	c := dial(t, s, "x")
	for _, v := range []int16{0, 1, 2, 3, 4} {
		av := c.apiVersions(v, "confluent-kafka-go", "2.15.1")
		if av.ErrorCode != 0 || len(av.ApiKeys) != 4 {
			t.Fatalf("v%d: error %d, %d keys", v, av.ErrorCode, len(av.ApiKeys))
		}
	}
	for _, v := range []int16{5, 127} {
		if av := c.apiVersions(v, "x", "1"); av.ErrorCode != errUnsupportedVersion || len(av.ApiKeys) != 4 {
			t.Fatalf("v%d: error %d, %d keys", v, av.ErrorCode, len(av.ApiKeys))
		}
	}
	for _, sw := range [][2]string{{"", "1"}, {"-lib", "1"}, {"lib", "1."}, {"li b", "1"}, {"lib", ""}} {
		if av := c.apiVersions(3, sw[0], sw[1]); av.ErrorCode != errInvalidRequest {
			t.Fatalf("software %q %q: error %d, want INVALID_REQUEST", sw[0], sw[1], av.ErrorCode)
		}
	}
	if !validSoftware("a") || !validSoftware("lib-rd.kafka9") || validSoftware("a-") || validSoftware(".a") {
		t.Fatal("validSoftware disagrees with Kafka's pattern")
	}
}

// TestMetadataVersions decodes Metadata at every advertised version; without an advertised
// address the broker is the address the client dialled.
func TestMetadataVersions(t *testing.T) {
	s, _ := startServer(t, testConfig(), &testkit.Recorder{})
	c := dial(t, s, "x")
	host, port, _ := net.SplitHostPort(s.Addr().String())
	wantPort, _ := strconv.Atoi(port)
	for v := int16(0); v <= 13; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		if v >= 10 {
			t1, t2 := kmsg.NewMetadataRequestTopic(), kmsg.NewMetadataRequestTopic()
			t1.Topic = kmsg.StringPtr("by-name")
			t2.TopicID = [16]byte{1, 2, 3}
			req.Topics = append(req.Topics, t1, t2)
		}
		md := c.request(req).(*kmsg.MetadataResponse)
		if len(md.Brokers) != 1 || md.Brokers[0].Host != host || md.Brokers[0].Port != int32(wantPort) {
			t.Fatalf("v%d: brokers %+v, want %s:%d", v, md.Brokers, host, wantPort)
		}
		if v >= 10 && (len(md.Topics) != 2 || md.Topics[0].ErrorCode != errUnknownTopicOrPartition || md.Topics[1].ErrorCode != errUnknownTopicID || md.Topics[1].TopicID != [16]byte{1, 2, 3}) {
			t.Fatalf("v%d: topics %+v", v, md.Topics)
		}
		if v < 10 && len(md.Topics) != 0 {
			t.Fatalf("v%d: topics %+v", v, md.Topics)
		}
	}
}

func TestIdleConnectionClosed(t *testing.T) {
	cfg := testConfig()
	cfg.IdleTimeout = 200 * time.Millisecond
	cfg.DefaultInterval = 100 * time.Millisecond
	s, _ := startServer(t, cfg, &testkit.Recorder{})
	c := dial(t, s, "idle")
	c.get([16]byte{})
	c.expectClosed()
	testkit.WaitFor(t, "the idle client's instance to go", func() bool { return s.reg.len() == 0 })
}

func TestMaxConnections(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConnections = 1
	s, _ := startServer(t, cfg, &testkit.Recorder{})
	first := dial(t, s, "first")
	first.apiVersions(3, "a", "1") // answered: the first connection is registered
	before := counterValue(t, rejectedConns)
	second := dial(t, s, "second")
	second.expectClosed()
	if counterValue(t, rejectedConns)-before != 1 {
		t.Fatal("rejected connection not counted")
	}
	first.apiVersions(3, "a", "1")
	first.nc.Close()
	testkit.WaitFor(t, "the first connection to be released", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.mu.conns) == 0
	})
	third := dial(t, s, "third")
	if av := third.apiVersions(3, "a", "1"); av.ErrorCode != 0 {
		t.Fatal("a connection was refused after the first one closed")
	}
}

func TestLifecycle(t *testing.T) {
	off, err := New(DefaultConfig(), &testkit.Recorder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Start(context.Background()); err != nil || off.Addr() != nil {
		t.Fatalf("listener off: %v, %v", err, off.Addr())
	}
	if err := off.Start(context.Background()); err == nil {
		t.Fatal("second Start accepted")
	}
	if err := off.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := New(DefaultConfig(), nil, nil); err == nil {
		t.Fatal("nil consumer accepted")
	}

	cfg := testConfig()
	s, err := New(cfg, &testkit.Recorder{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s, "x")
	c.get([16]byte{})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	if s.reg.len() != 0 {
		t.Fatal("instances survive shutdown")
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal("second Shutdown:", err)
	}
}

// TestTagCountBomb: a tagged-field count far beyond the bytes that follow is refused at once
// (kmsg alone would loop over it for seconds), in every flexible request served.
func TestTagCountBomb(t *testing.T) {
	bomb := []byte{0xff, 0xff, 0xff, 0xff, 0x0f} // uvarint 2^32-1
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bomb"))
	withBomb := func(r kmsg.Request) []byte {
		b := f.AppendRequest(nil, r, 1)
		b = append(b[:len(b)-1], bomb...) // the body's last byte is its empty tag section
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		return b
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "a", "1"
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 13
	push := kmsg.NewPtrPushTelemetryRequest()
	push.ClientInstanceID = newID()
	s, _ := startServer(t, testConfig(), &testkit.Recorder{})
	for _, r := range []kmsg.Request{av, md, kmsg.NewPtrGetTelemetrySubscriptionsRequest(), push} {
		c := dial(t, s, "x")
		before := counterValue(t, badMalformed)
		c.write(withBomb(r))
		c.expectClosed()
		if counterValue(t, badMalformed)-before != 1 {
			t.Fatalf("key %d: not counted as malformed", r.Key())
		}
	}
	// The same request, with its real tag section, is answered.
	c := dial(t, s, "x")
	if resp := c.request(md).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
		t.Fatal("plain Metadata v13 not answered")
	}
}

func TestMetadataTopicCap(t *testing.T) {
	s, _ := startServer(t, testConfig(), &testkit.Recorder{})
	for _, v := range []int16{1, 12} {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = v
		for i := 0; i <= maxMetadataTopics; i++ {
			tp := kmsg.NewMetadataRequestTopic()
			tp.Topic = kmsg.StringPtr("t")
			md.Topics = append(md.Topics, tp)
		}
		c := dial(t, s, "x")
		c.write((&kmsg.RequestFormatter{}).AppendRequest(nil, md, 1))
		c.expectClosed()
		md.Topics = md.Topics[:maxMetadataTopics]
		c = dial(t, s, "x")
		if resp := c.request(md).(*kmsg.MetadataResponse); len(resp.Topics) != maxMetadataTopics {
			t.Fatalf("v%d: %d topics answered", v, len(resp.Topics))
		}
	}
}

func TestReadRequest(t *testing.T) {
	for _, n := range []int{8, smallBufSize, smallBufSize + 1, 300_000} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(i * 7)
		}
		bp, _, _, err := readRequest(iotest.HalfReader(bytes.NewReader(want)), n, nil)
		if err != nil || !bytes.Equal(*bp, want) {
			t.Fatalf("n=%d: err %v, %d bytes", n, err, len(*bp))
		}
		pool.PutBytes(bp)
	}
	// A client announcing 4 MiB and sending 100 KB holds about that (or a buffer the pool
	// already had), not 4 MiB.
	sent := make([]byte, 100_000)
	bp, _, _, err := readRequest(iotest.HalfReader(bytes.NewReader(sent)), 4<<20, nil)
	if err == nil {
		t.Fatal("short request read without error")
	}
	if len(*bp) != len(sent) || cap(*bp) > 512<<10 {
		t.Fatalf("read %d bytes into a buffer of %d", len(*bp), cap(*bp))
	}
}
