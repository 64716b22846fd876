package kafka

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// seedRequests returns real and kmsg-encoded requests (size prefix included) for every API
// served, at several versions, plus the captured pushes.
func seedRequests(t testing.TB) [][]byte {
	var seeds [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	add := func(r kmsg.Request) { seeds = append(seeds, f.AppendRequest(nil, r, 42)) }
	for _, v := range []int16{0, 3, 4, 5} {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version, r.ClientSoftwareName, r.ClientSoftwareVersion = v, "librdkafka", "2.15.1"
		add(r)
	}
	for _, v := range []int16{0, 1, 9, 12, 13} {
		r := kmsg.NewPtrMetadataRequest()
		r.Version = v
		tp := kmsg.NewMetadataRequestTopic()
		tp.Topic = kmsg.StringPtr("t")
		r.Topics = append(r.Topics, tp)
		add(r)
	}
	add(kmsg.NewPtrGetTelemetrySubscriptionsRequest())
	push := kmsg.NewPtrPushTelemetryRequest()
	push.ClientInstanceID = [16]byte{1, 2, 3}
	push.Metrics, _ = testMetrics("a", "b").MarshalVT()
	add(push)
	for _, file := range captureFiles(t) {
		seeds = append(seeds, readFile(t, file))
	}
	return seeds
}

func fuzzServer(t testing.TB) *Server {
	cfg := testConfig()
	cfg.MaxInstances = 16
	cfg.MaxRequestBytes = 2 << 20
	s, err := New(cfg, &testkit.Discard{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// The instance gauges are the process's: instances left behind would count in a later
	// test's (never started, this server is not shut down).
	t.Cleanup(s.reg.clear)
	return s
}

// FuzzHandle feeds one request (without its size prefix) to the dispatcher: it must never
// panic, and an answer must be one well-formed response to that request's correlation id.
func FuzzHandle(f *testing.F) {
	for _, s := range seedRequests(f) {
		f.Add(s[4:])
	}
	s := fuzzServer(f)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	f.Fuzz(func(t *testing.T, req []byte) {
		c := newConn(s, a)
		resp, ok := c.handle(req)
		if !ok {
			if resp != nil {
				t.Fatal("a closing request produced a response")
			}
			return
		}
		if len(resp) < 8 || int(binary.BigEndian.Uint32(resp)) != len(resp)-4 {
			t.Fatalf("response size prefix wrong: %x", resp)
		}
		if string(resp[4:8]) != string(req[4:8]) {
			t.Fatalf("correlation id %x, request had %x", resp[4:8], req[4:8])
		}
		var h header
		if parsePrefix(req, &h) != nil {
			t.Fatal("answered a request without a header")
		}
		// The body must decode as the response to what was asked (ApiVersions: the version
		// asked, or v0 for the KIP-511 answer).
		kind := kmsg.ResponseForKey(h.key)
		version := h.version
		if h.key == keyApiVersions && !supported(h.key, h.version) {
			version = 0
		}
		kind.SetVersion(version)
		body := resp[8:]
		if kind.IsFlexible() && h.key != keyApiVersions {
			var err error
			if body, err = skipTags(body); err != nil {
				t.Fatalf("response header tags: %v", err)
			}
		}
		if err := kind.ReadFrom(body); err != nil {
			t.Fatalf("response to key %d v%d does not decode: %v", h.key, version, err)
		}
	})
}

// FuzzServe feeds a byte stream to a connection's read loop, framing included: whatever comes
// in, the loop ends when the stream does, and what it writes back is a run of well-formed,
// size-prefixed responses.
func FuzzServe(f *testing.F) {
	seeds := seedRequests(f)
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add(append(append([]byte(nil), seeds[0]...), seeds[len(seeds)-1]...))
	f.Add([]byte{0, 0, 0, 3, 0, 18, 0})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		srv, cli := net.Pipe()
		c := newConn(s, srv)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			c.serve()
			srv.Close()
		}()
		var out []byte
		go func() {
			defer wg.Done()
			out, _ = io.ReadAll(cli)
		}()
		cli.Write(stream) // may stop early when serve closes its end
		cli.Close()
		wg.Wait()
		s.reg.dropConn(c)
		for len(out) > 0 {
			if len(out) < 8 {
				t.Fatalf("truncated response %x", out)
			}
			n := int(binary.BigEndian.Uint32(out))
			if n < 4 || n > len(out)-4 {
				t.Fatalf("response size %d with %d bytes left", n, len(out)-4)
			}
			out = out[4+n:]
		}
	})
}
