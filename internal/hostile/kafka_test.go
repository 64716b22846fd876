package hostile

import (
	kafkawire "encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka attacks of findings 1 and 6, against the listener the harness turns on. Each test
// states the memory bound it asserts as arithmetic over the flags it passes:
//
//	bound = kafkaRest + 2 × live
//
// where live is what the configured limits let the process hold at once and the factor 2 is
// the Go collector's headroom (GOGC=100 lets the heap grow to twice what survived the last
// collection before it collects again). kafkaRest is the process at rest with its pools' reserves
// and the well-behaved client's traffic: TestBaselineServed sees well under it.
const kafkaRest = 64 << 20

// poolReserves is what the byte pool keeps through collections once it was in use (about
// 12 MiB over every tier, pool/reserve.go).
const poolReserves = 12 << 20

// kafkaLong reports whether the long forms run (make soak sets HOSTILE_LONG).
func kafkaLong() bool { return os.Getenv("HOSTILE_LONG") != "" }

// kafkaScale returns short in make test, long under make soak.
func kafkaScale(short, long int) int {
	if kafkaLong() {
		return long
	}
	return short
}

// kafkaClient speaks the Kafka protocol over one TCP connection, with kmsg.
type kafkaClient struct {
	t    testing.TB
	nc   net.Conn
	fmt  *kmsg.RequestFormatter
	corr int32
}

func kafkaDial(t testing.TB, g *gate, clientID string) *kafkaClient {
	t.Helper()
	c, err := kafkaTryDial(t, g, clientID)
	if err != nil {
		t.Fatalf("dial kafka: %v", err)
	}
	return c
}

// kafkaTryDial is kafkaDial for goroutines other than the test's.
func kafkaTryDial(t testing.TB, g *gate, clientID string) (*kafkaClient, error) {
	nc, err := net.DialTimeout("tcp", g.Kafka, 10*time.Second)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	return &kafkaClient{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}, nil
}

// roundTrip sends req and decodes its answer; an error means the connection ended instead.
func (c *kafkaClient) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	c.corr++
	c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.nc.Write(c.fmt.AppendRequest(nil, req, c.corr)); err != nil {
		return nil, err
	}
	return c.read(req)
}

// read reads the answer to req, written with the current correlation id.
func (c *kafkaClient) read(req kmsg.Request) (kmsg.Response, error) {
	c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, kafkawire.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, b); err != nil {
		return nil, err
	}
	if len(b) < 4 || int32(kafkawire.BigEndian.Uint32(b)) != c.corr {
		return nil, fmt.Errorf("answer %x does not start with correlation id %d", b[:min(len(b), 4)], c.corr)
	}
	b = b[4:]
	// Flexible responses other than ApiVersions have a header tag section; none is sent.
	if req.IsFlexible() && req.Key() != 18 {
		if len(b) == 0 || b[0] != 0 {
			return nil, fmt.Errorf("response header tags %x", b[:min(len(b), 4)])
		}
		b = b[1:]
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("response to key %d: %w", req.Key(), err)
	}
	return resp, nil
}

// must is roundTrip for requests the attack needs answered.
func (c *kafkaClient) must(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	resp, err := c.roundTrip(req)
	if err != nil {
		c.t.Fatalf("key %d: %v", req.Key(), err)
	}
	return resp
}

func kafkaSoftware(name string) *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = 3
	r.ClientSoftwareName, r.ClientSoftwareVersion = name, "1.0"
	return r
}

// kafkaEmptyEntries is a MetricsData of n empty resource_metrics entries (2 bytes each).
func kafkaEmptyEntries(n int) []byte {
	return []byte(strings.Repeat("\x0a\x00", n))
}

const (
	kafkaCodeNone           = 0
	kafkaCodeInvalidRequest = 42
)

// Finding 1: ApiVersions v3 with a 4 MB client software name, GetTelemetrySubscriptions, then
// a 40 KB push of 20,000 empty resource_metrics entries. The push path sized one buffer as
// entries × label bytes (about 84 GB) and the runtime died of it. Now the name is refused
// (INVALID_REQUEST, counted), and the push costs what it carries: it is answered, nothing is
// forwarded, and the process stays within its bound while the well-behaved client is served.
func TestKafkaLabelBomb(t *testing.T) {
	const wait = 2 * time.Second
	g := startGate(t, "-intake.unauthenticated.max-bytes", "64MiB", "-intake.max-decodes", "2", "-intake.wait", wait.String())
	w := watch(t, g, 100*time.Millisecond, 5*time.Second)
	name := strings.Repeat("a", 4<<20-256)
	push := kafkaEmptyEntries(20000)
	rounds := kafkaScale(3, 40)
	for i := range rounds {
		c := kafkaDial(t, g, fmt.Sprintf("bomb-%d", i))
		if r := c.must(kafkaSoftware(name)).(*kmsg.ApiVersionsResponse); r.ErrorCode != kafkaCodeInvalidRequest {
			t.Fatalf("round %d: ApiVersions with a %d-byte name: code %d, want INVALID_REQUEST", i, len(name), r.ErrorCode)
		}
		get := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
		sub := c.must(get).(*kmsg.GetTelemetrySubscriptionsResponse)
		if sub.ErrorCode != kafkaCodeNone {
			t.Fatalf("round %d: Get: code %d", i, sub.ErrorCode)
		}
		p := kmsg.NewPtrPushTelemetryRequest()
		p.ClientInstanceID, p.SubscriptionID, p.Metrics = sub.ClientInstanceID, sub.SubscriptionID, push
		resp, err := c.roundTrip(p)
		if err != nil {
			kafkaAwaitExit(g)
		}
		g.alive(t)
		if err != nil {
			t.Fatalf("round %d: push of %d empty entries: %v", i, 20000, err)
		}
		if code := resp.(*kmsg.PushTelemetryResponse).ErrorCode; code != kafkaCodeNone {
			t.Fatalf("round %d: push: code %d, want 0 (accepted, nothing to forward)", i, code)
		}
	}
	w.end(t, wait)
	g.alive(t)
	if n := g.metric(t, "otlpgate_kafka_oversized_labels_total", `label="client_software_name"`); n != float64(rounds) {
		t.Errorf("oversized software names counted %v, want %d", n, rounds)
	}
	if n := g.metric(t, "otlpgate_kafka_empty_pushes_total"); n != float64(rounds) {
		t.Errorf("empty pushes %v, want %d", n, rounds)
	}
	// live: the 4 MiB requests (each charged to -intake.unauthenticated.max-bytes at its tier, 64 MiB in all)
	// and 2 decodes × (a decompression buffer of the 1 MiB telemetry cap + a labelled body of
	// at most twice it) = 64 + 6 MiB, plus the pool's reserves.
	live := int64(64<<20 + 2*(1<<20+2<<20) + poolReserves)
	kafkaCheckRSS(t, g, kafkaRest+2*live)
}

// kafkaAwaitExit gives a process whose connection just broke a moment to be reaped, so that
// alive reports its death rather than the broken connection.
func kafkaAwaitExit(g *gate) {
	select {
	case <-g.exited:
	case <-time.After(5 * time.Second):
	}
}

// kafkaCheckRSS fails t if the peak RSS passed bound.
func kafkaCheckRSS(t *testing.T, g *gate, bound int64) {
	t.Helper()
	rss := g.PeakRSS(t)
	t.Logf("peak RSS %d MiB, bound %d MiB", rss>>20, bound>>20)
	if rss > bound {
		t.Errorf("peak RSS %d MiB over the bound %d MiB", rss>>20, bound>>20)
	}
}

// kafkaMetadata is a Metadata v1 request naming 10,000 topics (the most one may name) of
// 417-byte names: 4.19 MB, just within the default -kafka.max-request-bytes.
func kafkaMetadata() *kmsg.MetadataRequest {
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	name := strings.Repeat("t", 417)
	for range 10000 {
		tp := kmsg.NewMetadataRequestTopic()
		tp.Topic = kmsg.StringPtr(name)
		md.Topics = append(md.Topics, tp)
	}
	return md
}

// Finding 6, connections: idle connections after one 4 MB Metadata request each kept the
// request, its decoded topics and the 4 MB answer (1.69 GiB for 100 of them, while
// otlpgate_kafka_buffered_bytes read 0). Now a connection drops all of it once it has answered:
// with every connection still open at the end, the buffered gauge shows only small response
// buffers and the peak stays within the bound. Two clients at a time; half of them also leave
// an answer unread for a while, holding it in the server's hands.
func TestKafkaIdleAfterLargeMetadata(t *testing.T) {
	const wait = 2 * time.Second
	g := startGate(t, "-intake.unauthenticated.max-bytes", "64MiB", "-intake.wait", wait.String())
	w := watch(t, g, 100*time.Millisecond, 5*time.Second)
	n := kafkaScale(24, 100)
	md := kafkaMetadata()
	var mu sync.Mutex
	answered, closed := 0, 0
	var wg sync.WaitGroup
	next := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				resp, err := kafkaMetadataRound(t, g, md, i)
				mu.Lock()
				if err == nil && len(resp.(*kmsg.MetadataResponse).Topics) == 10000 {
					answered++
				} else {
					// A large answer that finds the limiter full closes its connection.
					closed++
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	g.alive(t)
	t.Logf("%d connections: %d answered, %d closed", n, answered, closed)
	if answered < n/2 {
		t.Fatalf("only %d of %d Metadata requests answered", answered, n)
	}
	// Every connection is open and idle now: each keeps a response buffer of 512 bytes.
	if b := g.metric(t, "otlpgate_kafka_buffered_bytes"); b < 0 || b > float64(n*16<<10) {
		t.Errorf("otlpgate_kafka_buffered_bytes %v with %d idle connections", b, n)
	}
	if c := g.metric(t, "otlpgate_kafka_connections"); c != float64(answered) {
		t.Errorf("otlpgate_kafka_connections %v, want the %d answered", c, answered)
	}
	w.end(t, wait)
	// live: request buffers and answers over 16 KiB are charged to -intake.unauthenticated.max-bytes (64 MiB),
	// plus what two requests in flight decode outside it (10,000 topics of a request and of
	// its answer, under 4 MiB each), plus the pool's reserves.
	live := int64(64<<20 + 2*(4<<20) + poolReserves)
	kafkaCheckRSS(t, g, kafkaRest+2*live)
}

// kafkaMetadataRound opens connection i and sends md on it. Odd ones read the answer only after
// a while, during which the server holds it, charged to the intake limiter.
func kafkaMetadataRound(t testing.TB, g *gate, md *kmsg.MetadataRequest, i int) (kmsg.Response, error) {
	c, err := kafkaTryDial(t, g, fmt.Sprintf("meta-%d", i))
	if err != nil {
		return nil, err
	}
	if i%2 == 0 {
		return c.roundTrip(md)
	}
	c.corr++
	c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.nc.Write(c.fmt.AppendRequest(nil, md, c.corr)); err != nil {
		return nil, err
	}
	time.Sleep(200 * time.Millisecond)
	return c.read(md)
}

// Finding 6, instances: client instances kept their labels whole (200 instances with 4 MB
// labels held 873 MB). Now a 4 MB software name is refused, and instances are bounded in bytes
// by -kafka.max-instance-bytes: 64 connections with their labels at the caps (each also sends
// a 4 MB name) create 20 instances each, and otlpgate_kafka_instance_bytes stays within the
// flag while the least recently seen are evicted.
func TestKafkaInstanceLabels(t *testing.T) {
	const wait = 2 * time.Second
	g := startGate(t, "-intake.unauthenticated.max-bytes", "64MiB", "-intake.wait", wait.String(), "-kafka.max-instance-bytes", "1MiB")
	w := watch(t, g, 100*time.Millisecond, 5*time.Second)
	conns := kafkaScale(64, 200)
	perConn := kafkaScale(20, 100)
	name := strings.Repeat("n", 4<<20-1024)
	for i := range conns {
		id := fmt.Sprintf("%03d", i) + strings.Repeat("c", 256-3)
		c := kafkaDial(t, g, id)
		if r := c.must(kafkaSoftware(strings.Repeat("s", 128))).(*kmsg.ApiVersionsResponse); r.ErrorCode != kafkaCodeNone {
			t.Fatalf("conn %d: software at the cap: code %d", i, r.ErrorCode)
		}
		// Refused, it leaves the connection's labels as they were (before, it replaced them).
		if r := c.must(kafkaSoftware(name)).(*kmsg.ApiVersionsResponse); r.ErrorCode != kafkaCodeInvalidRequest {
			t.Fatalf("conn %d: a %d-byte software name: code %d", i, len(name), r.ErrorCode)
		}
		for range perConn {
			if r := c.must(kmsg.NewPtrGetTelemetrySubscriptionsRequest()).(*kmsg.GetTelemetrySubscriptionsResponse); r.ErrorCode != kafkaCodeNone {
				t.Fatalf("conn %d: Get: code %d", i, r.ErrorCode)
			}
		}
		if b := g.metric(t, "otlpgate_kafka_instance_bytes"); b > 1<<20 {
			t.Fatalf("after %d connections: instances hold %v bytes, bound 1 MiB", i+1, b)
		}
	}
	g.alive(t)
	created, kept := g.metric(t, "otlpgate_kafka_instances_created_total"), g.metric(t, "otlpgate_kafka_instances")
	evicted := g.metric(t, "otlpgate_kafka_instances_removed_total", `reason="evicted"`)
	t.Logf("%v instances created, %v kept in %v bytes, %v evicted", created, kept, g.metric(t, "otlpgate_kafka_instance_bytes"), evicted)
	if created != float64(conns*perConn) || kept+evicted != created || kept >= created {
		t.Errorf("instances: %v created, %v kept, %v evicted", created, kept, evicted)
	}
	w.end(t, wait)
	// live: the 4 MiB ApiVersions requests charged to -intake.unauthenticated.max-bytes (64 MiB), the
	// instances within -kafka.max-instance-bytes (1 MiB), each connection's labels at the caps
	// (under 1 KiB each), plus the pool's reserves.
	live := int64(64<<20 + 1<<20 + conns*1<<10 + poolReserves)
	kafkaCheckRSS(t, g, kafkaRest+2*live)
}
