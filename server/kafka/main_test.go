package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// lastMetrics returns how many bodies rec was given, and the last one decoded with its items.
// The Kafka intake forwards metrics only: a body of another signal fails the test.
func lastMetrics(t testing.TB, rec *testkit.Recorder) (int, *metricsv1.MetricsData, int) {
	t.Helper()
	got := rec.Received()
	for _, g := range got {
		if g.Signal != fastpath.Metrics {
			t.Fatalf("the kafka intake forwarded %v", g.Signal)
		}
	}
	if len(got) == 0 {
		return 0, nil, 0
	}
	last := got[len(got)-1]
	var md metricsv1.MetricsData
	if err := md.UnmarshalVT(last.Body); err != nil {
		t.Fatalf("forwarded body does not decode: %v", err)
	}
	return len(got), &md, last.Items
}

// newClock is the clock of throttling and expiry in tests; it only moves when told.
func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// testConfig listens on a free loopback port with the default subscription on every metric.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DefaultInterval = time.Second
	return cfg
}

// startServer starts a server on loopback with a fake clock and stops it at the end of the test.
func startServer(t testing.TB, cfg Config, next pipeline.Consumer) (*Server, *testkit.Clock) {
	t.Helper()
	s, err := New(cfg, next, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	s.now = clk.Now
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s, clk
}

// client speaks the Kafka protocol over a real TCP connection, built on kmsg.
type client struct {
	t    testing.TB
	nc   net.Conn
	fmt  *kmsg.RequestFormatter
	corr int32
	// wait bounds each response; 10s when zero.
	wait time.Duration
}

func dial(t testing.TB, s *Server, clientID string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
}

// request sends req at its set version and decodes the response.
func (c *client) request(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.corr++
	c.write(c.fmt.AppendRequest(nil, req, c.corr))
	body := c.readResponse(c.corr, req.IsFlexible() && req.Key() != keyApiVersions)
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("response to key %d v%d does not decode: %v", req.Key(), req.GetVersion(), err)
	}
	return resp
}

func (c *client) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readResponse reads one response, checks its correlation id and skips the header's tags.
func (c *client) readResponse(corr int32, flexible bool) []byte {
	c.t.Helper()
	wait := c.wait
	if wait == 0 {
		wait = 10 * time.Second
	}
	c.nc.SetReadDeadline(time.Now().Add(wait))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		c.t.Fatalf("read response size: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, b); err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	b = b[4:]
	if flexible {
		rest, err := skipTags(b)
		if err != nil {
			c.t.Fatalf("response header tags: %v", err)
		}
		b = rest
	}
	return b
}

// expectClosed asserts that the server closes the connection (without answering).
func (c *client) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.nc.Read(make([]byte, 1))
	if n != 0 || (!errors.Is(err, io.EOF) && !isReset(err)) {
		c.t.Fatalf("connection still open: read %d bytes, err %v", n, err)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// apiVersions negotiates like a client: the error code leads every version of the response,
// and UNSUPPORTED_VERSION means the rest is in the v0 layout (KIP-511).
func (c *client) apiVersions(version int16, name, ver string) *kmsg.ApiVersionsResponse {
	c.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = name, ver
	c.corr++
	c.write(c.fmt.AppendRequest(nil, req, c.corr))
	body := c.readResponse(c.corr, false)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == errUnsupportedVersion {
		resp.Version = 0
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("ApiVersions v%d response does not decode: %v", version, err)
	}
	return resp
}

func (c *client) get(id [16]byte) *kmsg.GetTelemetrySubscriptionsResponse {
	c.t.Helper()
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = id
	return c.request(req).(*kmsg.GetTelemetrySubscriptionsResponse)
}

func (c *client) push(id [16]byte, subID int32, codec int8, payload []byte, terminating bool) int16 {
	c.t.Helper()
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID = id
	req.SubscriptionID = subID
	req.CompressionType = codec
	req.Metrics = payload
	req.Terminating = terminating
	return c.request(req).(*kmsg.PushTelemetryResponse).ErrorCode
}

// rawPush sends a whole captured request (size prefix included) and returns the error code.
func (c *client) rawPush(req []byte) int16 {
	c.t.Helper()
	c.write(req)
	corr := int32(binary.BigEndian.Uint32(req[8:]))
	var resp kmsg.PushTelemetryResponse
	if err := resp.ReadFrom(c.readResponse(corr, true)); err != nil {
		c.t.Fatalf("push response: %v", err)
	}
	return resp.ErrorCode
}

// captureFiles lists the captured requests under testdata/kip714.
func captureFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/kip714/*.request.bin")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	return files
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
