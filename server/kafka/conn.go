package kafka

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/pool"
)

var (
	connsGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "otlpgate_kafka_connections",
		Help: "Open Kafka client connections.",
	})
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

	requestsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
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
	// broker is the Metadata broker entry: the advertised address or this connection's local
	// address.
	broker []kmsg.MetadataResponseBroker
	// telemetry is set once the connection sent a telemetry request, so that closing it must
	// drop its instances.
	telemetry bool

	hdr header
	out []byte // response buffer, reused

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
	c := &conn{s: s, nc: nc, out: make([]byte, 0, 512)}
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
		bp, err := readRequest(c.nc, int(n))
		if err != nil {
			pool.PutBytes(bp)
			countReadError(err, true)
			return
		}
		resp, ok := c.handle(*bp)
		if ok {
			c.nc.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
			_, err = c.nc.Write(resp)
		}
		pool.PutBytes(bp)
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

// smallBufSize is the buffer every request starts in: the many small requests (ApiVersions,
// GetTelemetrySubscriptions) fit, and a push grows from it.
const smallBufSize = 16 << 10

// readRequest reads a request body of n bytes into a buffer from pool/. A large request grows
// its buffer as bytes arrive rather than reserving n up front, so a client that announces the
// maximum and then trickles holds memory in proportion to what it sent.
func readRequest(r io.Reader, n int) (*[]byte, error) {
	bp := pool.GetBytes(min(n, smallBufSize+1))
	buf := *bp
	if cap(buf) >= n {
		_, err := io.ReadFull(r, buf[:n])
		*bp = buf[:n]
		return bp, err
	}
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := pool.GetBytes(min(n, 2*cap(buf)))
			*grown = append(*grown, buf...)
			*bp = buf
			pool.PutBytes(bp)
			bp, buf = grown, *grown
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			*bp = buf
			return bp, err
		}
	}
	*bp = buf
	return bp, nil
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
	c.noteClientID(h.clientID)
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

// respond encodes r after a response header for the current request. ApiVersions passes
// flexible false whatever its version.
func (c *conn) respond(r kmsg.Response, flexible bool) []byte {
	c.out = appendResponseStart(c.out[:0], c.hdr.correlation, flexible)
	c.out = r.AppendTo(c.out)
	return finishResponse(c.out, 0)
}
