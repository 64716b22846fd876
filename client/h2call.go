package client

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/h2"
	"github.com/otlpgate/otlpgate/internal/rawio"
)

// The unary calls of transport=otlpgate, v1 and OTEP: a worker per call slot, as with grpc-go
// (unary.go), writing its call on the destination's current h2Conn and waiting for the
// reader to complete it. Results go through the same rules as grpc-go's calls
// (unaryAnswered, unaryFailed, result); what grpc-go reports as a status, this transport makes
// the same status of (the HTTP status, grpc-status, grpc-message, grpc-status-details-bin).
// OTEP streams are h2stream.go's.

// h2Transport holds a destination's connection: one at a time, replaced when it broke or the
// server sent GOAWAY (the old one finishes its calls and closes).
type h2Transport struct {
	cfg     *Config
	tls     *tls.Config                           // nil: h2c
	headers [fastpath.NumSignals]*h2.HeadersFrame // a call's HEADERS per signal, built once
	extra   []h2.HeaderField                      // the configured headers and authorization
	scheme  string
	methods [fastpath.NumSignals]string

	// tenants are the HEADERS frames of the tenants whose forward-headers values a call
	// carries, by tenant id (forward.go: the same life as the grpc-go path's contexts).
	tenants struct {
		sync.RWMutex
		m map[uint32]tenantFrames
	}

	mu struct {
		sync.Mutex
		cur    *h2Conn
		all    map[*h2Conn]struct{} // every connection whose reader runs
		closed bool
	}
	readers sync.WaitGroup
}

var errH2Stopped = errors.New("client: destination stopping")

// newH2Transport builds the HEADERS frames of the three Export calls: the configured headers
// and the bearer token (read now, as grpc-go's metadata is) sorted, so that the frames are the
// same every run.
func newH2Transport(cfg *Config, methods [fastpath.NumSignals]string) (*h2Transport, error) {
	var extra []h2.HeaderField
	for k, v := range cfg.Headers {
		extra = append(extra, h2.HeaderField{Name: k, Value: v})
	}
	slices.SortFunc(extra, func(a, b h2.HeaderField) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	auth, err := cfg.authorization()
	if err != nil {
		return nil, err
	}
	if auth != "" {
		extra = append(extra, h2.HeaderField{Name: "authorization", Value: auth})
	}
	t := &h2Transport{cfg: cfg, extra: extra}
	t.mu.all = map[*h2Conn]struct{}{}
	scheme := "http"
	if !cfg.TLS.Insecure {
		if t.tls, err = tlsConfig(cfg.TLS); err != nil {
			return nil, err
		}
		t.tls.NextProtos = []string{"h2"}
		if t.tls.ServerName == "" {
			t.tls.ServerName, _, _ = net.SplitHostPort(cfg.Endpoint)
		}
		scheme = "https"
	}
	t.scheme, t.methods = scheme, methods
	if t.headers, err = t.build(extra); err != nil {
		return nil, err
	}
	return t, nil
}

// build makes the HEADERS frames of the three calls with the fields extra.
func (t *h2Transport) build(extra []h2.HeaderField) (fs [fastpath.NumSignals]*h2.HeadersFrame, err error) {
	for sig, m := range t.methods {
		fs[sig], err = h2.NewHeadersFrame(false, h2.GRPCRequestHeaders(t.scheme, t.cfg.Endpoint, m, t.cfg.compressor(), "otlpgate", extra...)...)
		if err != nil {
			return fs, fmt.Errorf("client: destination %q: %w", t.cfg.Name, err)
		}
	}
	return fs, nil
}

// tenantFrames are the HEADERS frames of one tenant's calls.
type tenantFrames struct {
	t  *tenant.Tenant
	fs [fastpath.NumSignals]*h2.HeadersFrame
}

// frame is the HEADERS frame of a call of sig carrying tn's batch: the destination's, with
// tn's values of the forward-headers when it has any. A known tenant costs a map lookup; its
// frames are built the first time it sends. Safe for concurrent use.
func (t *h2Transport) frame(sig fastpath.Signal, tn *tenant.Tenant) (*h2.HeadersFrame, error) {
	if tn == nil || len(t.cfg.ForwardHeaders) == 0 {
		return t.headers[sig], nil
	}
	t.tenants.RLock()
	c := t.tenants.m[tn.ID()]
	t.tenants.RUnlock()
	if c.t == tn {
		return c.fs[sig], nil
	}
	extra := slices.Clone(t.extra)
	for _, h := range t.cfg.ForwardHeaders {
		if v, _ := tn.Value(h); v != "" {
			extra = append(extra, h2.HeaderField{Name: h, Value: v})
		}
	}
	fs, err := t.build(extra)
	if err != nil {
		return nil, err // values too long for one frame: the batch cannot be sent
	}
	t.tenants.Lock()
	if t.tenants.m == nil {
		t.tenants.m = map[uint32]tenantFrames{}
	}
	t.tenants.m[tn.ID()] = tenantFrames{tn, fs}
	t.tenants.Unlock()
	return fs[sig], nil
}

// secrets are the header values LastError and the log lines redact.
func (t *h2Transport) secrets() []string {
	var out []string
	for _, f := range t.extra {
		out = append(out, f.Value)
	}
	return out
}

// get returns the connection to send on, dialling when there is none that takes new calls.
// Workers wait for one dial together. Safe for concurrent use.
func (t *h2Transport) get() (*h2Conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil, errH2Stopped
	}
	if c := t.mu.cur; c != nil && c.usable() {
		return c, nil
	}
	t.mu.cur = nil
	timeout := min(20*time.Second, t.cfg.AckTimeout)
	c, err := dialH2(t.cfg.Endpoint, t.cfg, t.tls, timeout)
	if err != nil {
		return nil, err
	}
	t.mu.all[c] = struct{}{}
	t.readers.Add(1)
	go func() {
		defer t.readers.Done()
		c.readLoop()
		t.mu.Lock()
		delete(t.mu.all, c)
		t.mu.Unlock()
	}()
	// As grpc-go's client, no call before the server's SETTINGS: its MAX_CONCURRENT_STREAMS
	// would otherwise be learnt from the streams it refuses.
	wait := time.NewTimer(timeout)
	defer wait.Stop()
	select {
	case <-c.settled:
	case <-c.done:
		return nil, fmt.Errorf("connection to %s ended before the server's SETTINGS: %w", t.cfg.Endpoint, c.cause())
	case <-wait.C:
		c.fail(errors.New("no SETTINGS from the server"))
		return nil, fmt.Errorf("no HTTP/2 SETTINGS from %s within %v", t.cfg.Endpoint, timeout)
	}
	t.mu.cur = c
	return c, nil
}

// connected reports whether a connection is up (a Fleet's probe of an ejected backend).
func (t *h2Transport) connected() bool {
	t.mu.Lock()
	c := t.mu.cur
	t.mu.Unlock()
	if c != nil && c.usable() {
		return true
	}
	_, err := t.get()
	return err == nil
}

// abort closes every connection, failing their calls, and waits for their readers; nothing
// dials after it. Safe for concurrent use.
func (t *h2Transport) abort() {
	t.mu.Lock()
	t.mu.closed = true
	conns := make([]*h2Conn, 0, len(t.mu.all))
	for c := range t.mu.all {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.fail(errH2Stopped)
	}
	t.readers.Wait()
}

// h2Stream is one call's stream, reused by its worker for every call. The reader fills its
// answer fields while it is open; the worker reads them after the done token.
type h2Stream struct {
	id     uint32
	window int64 // send window, under the connection's mu
	open   bool  // in the connection's streams, under its mu
	recvd  uint32
	done   chan struct{}
	// bidi: a stream of many messages both ways (OTEP StreamExporter, h2stream.go): resp
	// gathers the answers' bytes as they come until the receiver takes them out, and more
	// wakes the receiver when some came.
	bidi bool
	more chan struct{}

	// The answer.
	err        error // the call ended without an answer (connection, RST_STREAM, GOAWAY)
	refused    bool  // the server did not process it: it may go again at once
	httpStatus int   // 0 until :status came
	grpcCT     bool
	grpcStatus int // -1 until grpc-status came
	msg        []byte
	details    []byte
	resp       []byte
	plain      []byte // resp decompressed
	over       bool   // the answer passed max-recv-msg-size

	// The request's wire: frame headers and the vector written with writev.
	hbuf   []byte
	prefix [5]byte
	segs   [][]byte // the message's segments (writeData)
	fhdrs  []byte
	vec    [][]byte
	wv     net.Buffers // vec, consumed by WriteTo
}

func newH2Stream() *h2Stream {
	return &h2Stream{
		done:  make(chan struct{}, 1),
		fhdrs: make([]byte, 0, h2MaxFramesPerCall*h2.FrameHeaderLen),
		vec:   make([][]byte, 0, 3*h2MaxFramesPerCall),
	}
}

// reset readies the stream for a call; under the connection's mu.
func (st *h2Stream) reset() {
	st.err, st.refused, st.over, st.grpcCT = nil, false, false, false
	st.httpStatus, st.grpcStatus, st.recvd = 0, -1, 0
	st.msg, st.details, st.resp = st.msg[:0], st.details[:0], st.resp[:0]
}

// finish completes the call; called once per call, by whoever removed it from the open streams
// (which cleared open under the connection's mu).
func (st *h2Stream) finish(err error, refused bool) {
	st.err, st.refused = err, refused
	st.done <- struct{}{}
}

// takeFields reads a header block of the answer (on the reader).
func (st *h2Stream) takeFields(fields []h2.Field) {
	for _, f := range fields {
		switch f.Keep {
		case keepStatus:
			n, _ := strconv.Atoi(string(f.Value)) // no allocation: the conversion does not escape
			st.httpStatus = n
		case keepContentType:
			v := f.Value
			st.grpcCT = len(v) >= 16 && string(v[:16]) == "application/grpc" && (len(v) == 16 || v[16] == '+' || v[16] == ';')
		case keepGRPCStatus:
			n, err := strconv.Atoi(string(f.Value))
			if err != nil || n < 0 {
				n = int(codes.Unknown)
			}
			st.grpcStatus = n
		case keepGRPCMessage:
			st.msg = append(st.msg[:0], f.Value...)
		case keepGRPCDetails:
			st.details = append(st.details[:0], f.Value...)
		}
	}
}

// take appends answer bytes (on the reader), up to the gRPC prefix and limit.
func (st *h2Stream) take(b []byte, limit int) {
	if st.over || len(st.resp)+len(b) > limit+5 {
		st.over = true
		return
	}
	st.resp = append(st.resp, b...)
}

// result reads the answer as grpc-go would: the reply's bytes, or the call's status as an
// error; tooLarge when the answer was over max-recv-msg-size. Runs on the worker after done.
func (st *h2Stream) result(comp encoding.Compressor, limit int) (reply []byte, err error) {
	if err := st.callStatus(); err != nil {
		return nil, err
	}
	switch {
	case st.over:
		return nil, errH2AnswerTooLarge
	case len(st.resp) == 0:
		return nil, nil // no message: an empty ExportResponse is no partial success
	case len(st.resp) < 5 || int(binary.BigEndian.Uint32(st.resp[1:])) != len(st.resp)-5:
		return nil, status.Error(codes.Internal, "the upstream's answer is not one gRPC message")
	case st.resp[0] == 1:
		return st.inflate(comp, limit)
	case st.resp[0] != 0:
		return nil, status.Error(codes.Internal, "the upstream's answer has a bad compressed flag")
	}
	return st.resp[5:], nil
}

// callStatus is how the call ended as grpc-go would report it: nil for grpc-status 0, else
// the status (or the transport's error as UNAVAILABLE). Runs after done.
func (st *h2Stream) callStatus() error {
	switch {
	case st.err != nil:
		if _, ok := status.FromError(st.err); ok {
			return st.err
		}
		return status.Error(codes.Unavailable, st.err.Error())
	case st.httpStatus == 0:
		return status.Error(codes.Internal, "malformed header: missing HTTP status")
	case st.httpStatus != 200:
		return status.Errorf(httpStatusCode(st.httpStatus), "unexpected HTTP status code received from server: %d", st.httpStatus)
	case !st.grpcCT:
		return status.Error(codes.Internal, "transport: received unexpected content-type")
	case st.grpcStatus < 0:
		return status.Error(codes.Internal, "server closed the stream without sending trailers")
	case st.grpcStatus != 0:
		return st.statusError()
	}
	return nil
}

// inflate decompresses a compressed answer (a grpc-go server answers in the encoding of the
// request) into the stream's buffer, up to limit bytes.
func (st *h2Stream) inflate(comp encoding.Compressor, limit int) (out []byte, err error) {
	st.plain, out, err = inflateInto(st.plain, st.resp[5:], comp, limit)
	return out, err
}

// inflateInto decompresses msg into buf (grown as needed, returned for reuse), up to limit
// bytes: out is the message, errH2AnswerTooLarge past limit.
func inflateInto(buf, msg []byte, comp encoding.Compressor, limit int) (keep, out []byte, err error) {
	if comp == nil {
		return buf, nil, status.Error(codes.Internal, "the upstream compressed its answer, which the call did not accept")
	}
	zr, err := comp.Decompress(bytes.NewReader(msg))
	if err != nil {
		return buf, nil, status.Errorf(codes.Internal, "cannot decompress the upstream's answer: %v", err)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := zr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return buf, nil, errH2AnswerTooLarge
		}
		if err == io.EOF {
			return buf, buf, nil
		}
		if err != nil {
			return buf, nil, status.Errorf(codes.Internal, "cannot decompress the upstream's answer: %v", err)
		}
	}
}

var errH2AnswerTooLarge = errors.New("client: answer over max-recv-msg-size")

// statusError is the status of a failed call, with its details when the server sent them.
func (st *h2Stream) statusError() error {
	msg, err := url.PathUnescape(string(st.msg)) // grpc-message is percent-encoded
	if err != nil {
		msg = string(st.msg)
	}
	if len(st.details) > 0 {
		raw, err := base64.RawStdEncoding.DecodeString(string(trimPad(st.details)))
		p := &spb.Status{}
		if err == nil && proto.Unmarshal(raw, p) == nil && p.Code == int32(st.grpcStatus) {
			return status.FromProto(p).Err()
		}
	}
	return status.Error(codes.Code(st.grpcStatus), msg)
}

func trimPad(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == '=' {
		b = b[:len(b)-1]
	}
	return b
}

// httpStatusCode maps an HTTP status of an answer without grpc-status as grpc-go does.
func httpStatusCode(s int) codes.Code {
	switch s {
	case 400:
		return codes.Internal
	case 401:
		return codes.Unauthenticated
	case 403:
		return codes.PermissionDenied
	case 404:
		return codes.Unimplemented
	case 429, 502, 503, 504:
		return codes.Unavailable
	}
	return codes.Unknown
}

// rstError is the status of a call the server reset, as grpc-go maps the codes.
func rstError(code http2.ErrCode) error {
	c := codes.Internal
	switch code {
	case http2.ErrCodeRefusedStream:
		c = codes.Unavailable
	case http2.ErrCodeCancel:
		c = codes.Canceled
	case http2.ErrCodeEnhanceYourCalm:
		c = codes.ResourceExhausted
	case http2.ErrCodeInadequateSecurity:
		c = codes.PermissionDenied
	}
	return status.Errorf(c, "stream terminated by RST_STREAM with error code: %v", code)
}

// open starts a call on the connection: a stream slot (waiting while MAX_CONCURRENT_STREAMS
// are open), an id, and its HEADERS. false: the connection takes no new stream (GOAWAY, or it
// ended), or stop was set (nil: never; whoever sets it broadcasts the connection's cond under
// its mu); the call did not start.
func (c *h2Conn) open(st *h2Stream, hf *h2.HeadersFrame, stop *atomic.Bool) bool {
	stopped := func() bool { return stop != nil && stop.Load() }
	c.mu.Lock()
	for !c.mu.goaway && c.mu.reserved >= c.mu.maxStreams && !stopped() {
		c.mu.cond.Wait()
	}
	if c.mu.goaway || stopped() {
		c.mu.Unlock()
		return false
	}
	c.mu.reserved++
	c.mu.Unlock()

	c.wmu.Lock()
	c.mu.Lock()
	if c.mu.goaway || c.mu.nextID > h2.MaxWindow-2 || stopped() {
		c.mu.reserved--
		if !stopped() {
			c.mu.goaway = true // stream ids ran out: the next call dials
		}
		c.mu.cond.Broadcast()
		c.mu.Unlock()
		c.wmu.Unlock()
		return false
	}
	st.reset()
	st.id, st.window, st.open = c.mu.nextID, c.mu.initWindow, true
	c.mu.nextID += 2
	c.mu.streams = append(c.mu.streams, st)
	c.mu.Unlock()
	st.hbuf = hf.Append(st.hbuf[:0], st.id)
	_, err := c.nc.Write(st.hbuf)
	c.wmu.Unlock()
	if err != nil {
		c.fail(err) // completes st
	}
	return true
}

// writeData sends the gRPC message (the 5-byte prefix, then payload) as the whole request
// (END_STREAM on its last frame): writeMsg with the payload as one segment.
func (c *h2Conn) writeData(st *h2Stream, payload []byte, compressed bool) {
	st.segs = append(st.segs[:0], grpcHead(st.prefix[:], len(payload), compressed), payload)
	c.writeMsg(st, st.segs, 5+len(payload), true)
}

// grpcHead writes the gRPC prefix of a message of n bytes into b and returns it.
func grpcHead(b []byte, n int, compressed bool) []byte {
	b[0] = 0
	if compressed {
		b[0] = 1
	}
	binary.BigEndian.PutUint32(b[1:5], uint32(n))
	return b[:5]
}

// writeMsg sends total bytes, the concatenation of segs (a gRPC message, its prefix
// included), in DATA frames that fit the stream's and the connection's windows and the
// server's MAX_FRAME_SIZE, END_STREAM on the last when end is set; each round of frames the
// windows allow goes in one writev, the segments' bytes straight from where they are (a
// batch's pooled bytes). A message larger than the windows goes in pieces as they open. It
// stops early, reporting false, when the stream ended (the server answered before the whole
// request came, reset it, the call was cancelled or the connection broke).
func (c *h2Conn) writeMsg(st *h2Stream, segs [][]byte, total int, end bool) bool {
	seg, segOff := 0, 0 // the cursor in segs: what goes next
	for sent := 0; sent < total; {
		c.mu.Lock()
		for st.open && (st.window <= 0 || c.mu.connWindow <= 0) {
			c.mu.cond.Wait()
		}
		if !st.open {
			c.mu.Unlock()
			return false
		}
		frame := c.mu.maxFrame
		n := min(total-sent, int(min(st.window, c.mu.connWindow)), frame*h2MaxFramesPerCall)
		st.window -= int64(n)
		c.mu.connWindow -= int64(n)
		c.mu.Unlock()

		st.fhdrs, st.vec = st.fhdrs[:0], st.vec[:0]
		for off := sent; off < sent+n; {
			l := min(frame, sent+n-off)
			var flags http2.Flags
			if end && off+l == total {
				flags = http2.FlagDataEndStream
			}
			h := len(st.fhdrs)
			st.fhdrs = h2.AppendFrameHeader(st.fhdrs, h2.FrameHeader{Length: uint32(l), Type: http2.FrameData, Flags: flags, StreamID: st.id})
			st.vec = append(st.vec, st.fhdrs[h:])
			for want := l; want > 0; {
				b := segs[seg][segOff:]
				if len(b) > want {
					st.vec = append(st.vec, b[:want])
					segOff += want
					break
				}
				if len(b) > 0 {
					st.vec = append(st.vec, b)
				}
				want -= len(b)
				seg, segOff = seg+1, 0
			}
			off += l
		}
		c.wmu.Lock()
		var err error
		if c.tls {
			// tls.Conn writes each buffer of a vector as its own record: gather them, since
			// the encryption copies the bytes anyway.
			c.wbuf = c.wbuf[:0]
			for _, b := range st.vec {
				c.wbuf = append(c.wbuf, b...)
			}
			_, err = c.nc.Write(c.wbuf)
		} else {
			st.wv = st.vec
			_, err = rawio.WriteBuffers(c.nc, &st.wv)
		}
		c.wmu.Unlock()
		if err != nil {
			c.fail(err)
			return false
		}
		sent += n
	}
	return true
}

// cancel gives up on a call that is still open: RST_STREAM(CANCEL). It reports whether the
// call was still open; if not, its done token is on the way.
func (c *h2Conn) cancel(st *h2Stream) bool {
	if !c.reset(st, http2.ErrCodeCancel) {
		return false
	}
	c.closeIfDrained()
	return true
}

// closeIfDrained closes a connection that takes no new streams once its last one ended.
func (c *h2Conn) closeIfDrained() {
	c.mu.Lock()
	drained := c.mu.goaway && len(c.mu.streams) == 0
	c.mu.Unlock()
	if drained {
		c.nc.Close()
	}
}
