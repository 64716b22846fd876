package kafka

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
	"github.com/otlpgate/otlpgate/pool"
)

// liveServers holds every server between New and Shutdown, for the gauges that read their own
// state at scrape time.
var liveServers sync.Map

// sumLive adds f over the live servers.
func sumLive(f func(*Server) int) float64 {
	n := 0
	liveServers.Range(func(k, _ any) bool {
		n += f(k.(*Server))
		return true
	})
	return float64(n)
}

var (
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_kafka_connections",
		Help: "Open Kafka client connections.",
	}, func() float64 {
		return sumLive(func(s *Server) int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.mu.conns) })
	})
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_kafka_instances",
		Help: "Kafka client instances (KIP-714) currently known.",
	}, func() float64 { return sumLive(func(s *Server) int { return s.reg.len() }) })
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "otlpgate_kafka_instance_bytes",
		Help: "Estimated memory of the Kafka client instances known (labels, attributes, plans), bounded by -kafka.max-instance-bytes.",
	}, func() float64 { return sumLive(func(s *Server) int { return int(s.reg.bytes()) }) })
	rejectedConns = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_rejected_connections_total",
		Help: "Kafka connections closed on accept because -kafka.max-connections were open.",
	})
	badRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_bad_requests_total",
		Help: "Kafka requests that closed their connection, by reason: too_large (over -kafka.max-request-bytes, or under a header), malformed (header or body does not decode), unsupported (an API key or version not served), truncated (the client closed the connection inside a request).",
	}, []string{"reason"})
	badTooLarge    = badRequests.WithLabelValues("too_large")
	badMalformed   = badRequests.WithLabelValues("malformed")
	badUnsupported = badRequests.WithLabelValues("unsupported")
	badTruncated   = badRequests.WithLabelValues("truncated")

	timeouts = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_timeouts_total",
		Help: "Kafka connections closed by the intake, by kind: idle (nothing received for -kafka.idle-timeout), read (a request left unfinished for -kafka.read-timeout).",
	}, []string{"kind"})
	idleTimeouts = timeouts.WithLabelValues("idle")
	readTimeouts = timeouts.WithLabelValues("read")

	requestsTotal = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_requests_total",
		Help: "Kafka requests answered, by API.",
	}, []string{"api"})
	requestsApiVersions = requestsTotal.WithLabelValues("api_versions")
	requestsMetadata    = requestsTotal.WithLabelValues("metadata")
	requestsGet         = requestsTotal.WithLabelValues("get_telemetry_subscriptions")
	requestsPush        = requestsTotal.WithLabelValues("push_telemetry")
)

// conn is one client connection. Every field is owned by the connection's goroutine, except
// telemetry, which removeConn reads after serve returned.
type conn struct {
	s  *Server
	nc net.Conn

	// lbl describes the client; replaced (never modified) when the client id or software
	// changes, so instances compare it by pointer.
	lbl *clientLabels
	// next takes the connection's pushes: the server's Consumer, told the client's address
	// (-resource.from-peer), bound once per connection so that a push allocates nothing for
	// it.
	next pipeline.Consumer
	// broker is the Metadata broker entry: the advertised address or this connection's local
	// address.
	broker []kmsg.MetadataResponseBroker
	// telemetry is set once the connection sent a telemetry request, so that closing it must
	// drop its instances.
	telemetry bool

	hdr header
	out []byte // response buffer, reused while small (response.go)
	// outNoted is the capacity of out counted in otlpgate_kafka_buffered_bytes; outCharged the
	// limiter bytes a large response holds until it is written.
	outNoted   int
	outCharged int64

	apiReq   kmsg.ApiVersionsRequest
	apiResp  kmsg.ApiVersionsResponse
	metaReq  kmsg.MetadataRequest
	metaResp kmsg.MetadataResponse
	getReq   kmsg.GetTelemetrySubscriptionsRequest
	getResp  kmsg.GetTelemetrySubscriptionsResponse
	pushReq  kmsg.PushTelemetryRequest
	pushResp kmsg.PushTelemetryResponse
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, next: s.next}
	// Once per connection: parsing the address's text costs nothing per push.
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		c.next = &fromConsumer{s.next, pipeline.Origin{Peer: ap.Addr().Unmap()}}
	}
	addr, port := splitAddr(nc.RemoteAddr())
	c.lbl = &clientLabels{sourceAddress: addr, sourcePort: port}
	host, p := s.advHost, s.advPort
	if host == "" {
		var ps string
		host, ps = splitAddr(nc.LocalAddr())
		n, _ := strconv.ParseInt(ps, 10, 32)
		p = int32(n)
	}
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = brokerNodeID, host, p
	c.broker = []kmsg.MetadataResponseBroker{b}
	return c
}

// fromConsumer hands what a connection pushes to the server's Consumer as requests from the
// connection's origin.
type fromConsumer struct {
	next pipeline.Consumer
	from pipeline.Origin
}

func (f *fromConsumer) Consume(req pipeline.Request) error {
	req.Origin = f.from
	return f.next.Consume(req)
}

// splitAddr returns the host and port of a TCP address as strings.
func splitAddr(a net.Addr) (string, string) {
	if a == nil {
		return "", ""
	}
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String(), strconv.Itoa(t.Port)
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), ""
	}
	return host, port
}

// serve reads requests one at a time and answers each before reading the next, which is the
// order Kafka clients expect responses in. It returns when the client goes away, idles past
// the idle timeout, leaves a request unfinished past the read timeout, or sends something that
// closes the connection.
func (c *conn) serve() {
	cfg := &c.s.cfg
	var size [4]byte
	for {
		// Between requests only the idle timeout applies; from a request's first byte on, the
		// read timeout bounds the rest of it, size prefix included.
		c.nc.SetReadDeadline(time.Now().Add(cfg.IdleTimeout))
		got, err := io.ReadAtLeast(c.nc, size[:], 1)
		if err != nil {
			countReadError(err, false)
			return
		}
		c.nc.SetReadDeadline(time.Now().Add(cfg.ReadTimeout))
		if got < len(size) {
			if _, err := io.ReadFull(c.nc, size[got:]); err != nil {
				countReadError(err, true)
				return
			}
		}
		n := int64(int32(binary.BigEndian.Uint32(size[:])))
		if n < minRequestSize || n > int64(cfg.MaxRequestBytes) {
			badTooLarge.Inc()
			return
		}
		lim := cfg.Limiter
		bp, held, busy, rerr := readRequest(c.nc, int(n), lim)
		var resp []byte
		var ok bool
		switch {
		case rerr != nil:
			putRequest(bp, held, lim)
			countReadError(rerr, true)
			return
		case busy:
			resp, ok, err = c.refuseBusy(*bp, int(n))
			putRequest(bp, held, lim)
			if err != nil {
				countReadError(err, true)
				return
			}
		default:
			hold := noteBuffered(cap(*bp))
			resp, ok = c.handle(*bp)
			noteBuffered(-hold)
			putRequest(bp, held, lim)
		}
		if ok {
			ok = c.chargeResponse()
		}
		if ok {
			c.nc.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
			_, err = c.nc.Write(resp)
		}
		c.endResponse()
		if !ok || err != nil {
			return
		}
	}
}

// countReadError counts why a read ended the connection: a deadline as an idle or a read
// timeout (inRequest: the request's first byte had arrived), the client closing inside a
// request as truncated. A clean close between requests and a connection closed by Shutdown
// are not counted.
func countReadError(err error, inRequest bool) {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		if inRequest {
			readTimeouts.Inc()
		} else {
			idleTimeouts.Inc()
		}
	case inRequest && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		badTruncated.Inc()
	}
}

// buffered is what connections hold in buffers (requests, decompressed and labelled pushes,
// responses), with its high-water mark: what the limits bound, measured on the buffers
// themselves.
var buffered, bufferedHigh atomic.Int64

var _ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
	Name: "otlpgate_kafka_buffered_bytes",
	Help: "Bytes Kafka connections hold in buffers: requests being handled, decompressed and labelled pushes (bounded through -intake.max-bytes and -intake.max-decodes), and responses (over 16KiB charged to -intake.max-bytes while written; each connection keeps one small buffer between requests).",
}, func() float64 { return float64(buffered.Load()) })

// noteBuffered adds n (negative: gives back) to buffered and returns n.
func noteBuffered(n int) int {
	v := buffered.Add(int64(n))
	for h := bufferedHigh.Load(); v > h && !bufferedHigh.CompareAndSwap(h, v); h = bufferedHigh.Load() {
	}
	return n
}

// smallBufSize is the buffer every request starts in: the many small requests (ApiVersions,
// GetTelemetrySubscriptions) fit, and a push grows from it. It is not taken from the intake
// limiter: connections are capped (-kafka.max-connections), and so is what they hold this way.
const smallBufSize = 16 << 10

// readRequest reads a request body of n bytes into a buffer from pool/. A large request grows
// its buffer as bytes arrive rather than reserving n up front, and each buffer past the first
// takes its capacity from the intake limiter (the budget of the unauthenticated intakes)
// before anything is read into it, giving back the one it replaces: a client that announces
// the maximum and then trickles holds memory, and budget, in proportion to what it sent. While
// a growth waits for the limiter nothing is read, so TCP holds the client back.
//
// held is what the buffer took from the limiter (give it back with putRequest). busy means the
// limiter had no room within -intake.wait: the buffer holds the bytes read so far (at least the
// first buffer's worth), the rest is still to be read.
func readRequest(r io.Reader, n int, lim *admission.Limiter) (bp *[]byte, held int64, busy bool, err error) {
	first := min(n, smallBufSize+1)
	bp = pool.GetBytes(first)
	*bp = (*bp)[:0:pool.Cap(first)]
	buf := *bp
	for len(buf) < n {
		if len(buf) == cap(buf) {
			size := min(n, 2*cap(buf))
			want := pool.Cap(size)
			if lim != nil && !lim.AcquireBytes(admission.IntakeKafka, int64(want), nil) {
				*bp = buf
				return bp, held, true, nil
			}
			grown := pool.GetBytes(size)
			*grown = append((*grown)[:0:want], buf...)
			*bp = buf
			putRequest(bp, held, lim)
			bp, buf, held = grown, *grown, 0
			if lim != nil {
				held = int64(want)
			}
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			*bp = buf
			return bp, held, false, err
		}
	}
	*bp = buf
	return bp, held, false, nil
}

// putRequest returns a request buffer of readRequest to the pool and its bytes to lim.
func putRequest(bp *[]byte, held int64, lim *admission.Limiter) {
	pool.PutBytes(bp)
	if held > 0 {
		lim.ReleaseBytes(admission.IntakeKafka, held)
	}
}

// refuseBusy answers a request of n bytes for which the limiter had no room, of which got was
// read: the rest is read and dropped through a small buffer. A push is answered
// THROTTLING_QUOTA_EXCEEDED with the limiter's wait as throttle time (the client pushes again
// after its interval); any other request this large closes the connection.
func (c *conn) refuseBusy(got []byte, n int) ([]byte, bool, error) {
	if _, err := io.CopyN(io.Discard, c.nc, int64(n-len(got))); err != nil {
		return nil, false, err
	}
	h := &c.hdr
	if parsePrefix(got, h) != nil || h.key != keyPushTelemetry || !supported(h.key, h.version) {
		return nil, false, nil
	}
	requestsPush.Inc()
	errIntakeBusy.Inc()
	resp := &c.pushResp
	*resp = kmsg.NewPushTelemetryResponse()
	resp.Version = h.version
	resp.ErrorCode = errThrottlingQuotaExceeded
	resp.ThrottleMillis = int32(c.s.cfg.Limiter.Wait().Milliseconds())
	return c.respond(resp, true), true, nil
}

// handle answers one request (without its size prefix). It returns the whole response, size
// included, valid until the next call; ok false means close the connection instead.
func (c *conn) handle(req []byte) (resp []byte, ok bool) {
	h := &c.hdr
	if err := parsePrefix(req, h); err != nil {
		badMalformed.Inc()
		return nil, false
	}
	if !supported(h.key, h.version) {
		if h.key == keyApiVersions {
			// KIP-511: a client that tries a newer ApiVersions than the broker knows gets a v0
			// answer listing what is supported, and retries with that.
			return c.apiVersionsTooNew(), true
		}
		badUnsupported.Inc()
		return nil, false
	}
	if err := parseHeader(req, h, flexibleRequest(h.key, h.version)); err != nil || !checkBody(h.key, h.version, h.body) {
		badMalformed.Inc()
		return nil, false
	}
	if c.clientIDFits() {
		c.noteClientID(h.clientID)
	}
	switch h.key {
	case keyApiVersions:
		return c.apiVersions()
	case keyMetadata:
		return c.metadata()
	case keyGetTelemetrySubscriptions:
		return c.getSubscriptions()
	case keyPushTelemetry:
		return c.pushTelemetry()
	}
	panic("BUG: supported API without a handler")
}

// noteClientID keeps the client id of the latest request; a null id counts as empty.
func (c *conn) noteClientID(id []byte) {
	if string(id) == c.lbl.clientID {
		return
	}
	l := *c.lbl
	l.clientID = string(id)
	c.lbl = &l
}
