package kafka

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// healthy is a well-behaved client that sends ApiVersions every few milliseconds on its own
// connection and checks each answer, until stopped.
type healthy struct {
	stop     chan struct{}
	done     chan struct{}
	answered int
	err      error
}

func startHealthy(t testing.TB, s *Server) *healthy {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	h := &healthy{stop: make(chan struct{}), done: make(chan struct{})}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "healthy", "1"
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("healthy"))
	go func() {
		defer close(h.done)
		defer nc.Close()
		// Bounded: 20000 requests 2 ms apart outlast any wait of these tests.
		for corr := int32(1); corr <= 20000; corr++ {
			select {
			case <-h.stop:
				return
			default:
			}
			nc.SetDeadline(time.Now().Add(30 * time.Second))
			if _, h.err = nc.Write(f.AppendRequest(nil, req, corr)); h.err != nil {
				return
			}
			var size [4]byte
			if _, h.err = io.ReadFull(nc, size[:]); h.err != nil {
				return
			}
			resp := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, h.err = io.ReadFull(nc, resp); h.err != nil {
				return
			}
			var av kmsg.ApiVersionsResponse
			av.Version = 3
			if got := int32(binary.BigEndian.Uint32(resp)); got != corr {
				h.err = errors.New("correlation id mismatch")
				return
			}
			if h.err = av.ReadFrom(resp[4:]); h.err != nil {
				return
			}
			if av.ErrorCode != 0 || len(av.ApiKeys) != 4 {
				h.err = errors.New("bad ApiVersions answer")
				return
			}
			h.answered++
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return h
}

func (h *healthy) finish(t testing.TB) {
	t.Helper()
	close(h.stop)
	<-h.done
	if h.err != nil {
		t.Fatalf("the healthy connection broke after %d answers: %v", h.answered, h.err)
	}
	if h.answered == 0 {
		t.Fatal("the healthy connection got no answer")
	}
}

// trickle writes first, then (with more) one zero byte every 20 ms, until the server closes the
// connection; each pause is a read that notices the close. It reports whether the server did
// within 30 s.
func trickle(nc net.Conn, first []byte, more bool) bool {
	if _, err := nc.Write(first); err != nil {
		return true
	}
	for range 1500 {
		nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := nc.Read(make([]byte, 1))
		var ne net.Error
		if n > 0 || err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			return n == 0 // closed (EOF or reset); an answer would be a failure
		}
		if !more {
			continue
		}
		if _, err := nc.Write([]byte{0}); err != nil {
			return true
		}
	}
	return false
}

// TestReadTimeout: a client that stops inside a request's size prefix, or trickles its body one
// byte every 20 ms, is cut off by the read timeout (the idle timeout is 10 minutes); a healthy
// connection beside it is unaffected.
func TestReadTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.ReadTimeout = 200 * time.Millisecond
	s, _ := startServer(t, cfg, &testkit.Recorder{})
	for _, tc := range []struct {
		name  string
		first []byte
		more  bool
	}{
		{"stalled in the size prefix", []byte{0}, false},
		{"trickling the body", []byte{0, 0, 1, 0, 0, 18, 0, 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read, idle, truncated := counterValue(t, readTimeouts), counterValue(t, idleTimeouts), counterValue(t, badTruncated)
			good := startHealthy(t, s)
			slow, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			if !trickle(slow, tc.first, tc.more) {
				t.Fatal("the slow client was not cut off within 30 s")
			}
			good.finish(t)
			if d := counterValue(t, readTimeouts) - read; d != 1 {
				t.Errorf("read timeouts %v, want 1", d)
			}
			if d := counterValue(t, idleTimeouts) - idle; d != 0 {
				t.Errorf("idle timeouts %v, want 0", d)
			}
			if d := counterValue(t, badTruncated) - truncated; d != 0 {
				t.Errorf("truncated %v, want 0", d)
			}
		})
	}
}

// TestIdleTimeoutCounted: the idle timeout of TestIdleConnectionClosed is counted as such, and
// spares a busy connection.
func TestIdleTimeoutCounted(t *testing.T) {
	cfg := testConfig()
	cfg.IdleTimeout = 2 * time.Second
	cfg.DefaultInterval = 100 * time.Millisecond
	s, _ := startServer(t, cfg, &testkit.Recorder{})
	read, idle := counterValue(t, readTimeouts), counterValue(t, idleTimeouts)
	good := startHealthy(t, s)
	c := dial(t, s, "idle")
	c.apiVersions(3, "idle", "1")
	c.expectClosed()
	good.finish(t)
	if d := counterValue(t, idleTimeouts) - idle; d != 1 {
		t.Errorf("idle timeouts %v, want 1", d)
	}
	if d := counterValue(t, readTimeouts) - read; d != 0 {
		t.Errorf("read timeouts %v, want 0", d)
	}
}

// TestTruncatedRequest: a client that closes inside a request is counted; one that closes
// between requests is not.
func TestTruncatedRequest(t *testing.T) {
	s, _ := startServer(t, testConfig(), &testkit.Recorder{})
	for _, tc := range []struct {
		name  string
		bytes []byte
		want  float64
	}{
		{"nothing", nil, 0},
		{"part of the size", []byte{0, 0}, 1},
		{"part of the body", []byte{0, 0, 0, 100, 0, 18}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counterValue(t, badTruncated)
			s.mu.Lock()
			conns := len(s.mu.conns)
			s.mu.Unlock()
			c := dial(t, s, "x")
			c.apiVersions(3, "a", "1") // answered: the connection is registered
			if len(tc.bytes) > 0 {
				c.write(tc.bytes)
			}
			c.nc.Close()
			testkit.WaitFor(t, "the connection to be released", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return len(s.mu.conns) == conns
			})
			if d := counterValue(t, badTruncated) - before; d != tc.want {
				t.Fatalf("truncated %v, want %v", d, tc.want)
			}
		})
	}
}
