package hostile

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// grpcRaw is a hostile HTTP/2 client: it writes frames exactly as a test tells it to, with
// golang.org/x/net/http2's framer and an HPACK encoder of its own, and reads whatever the server
// sends on a goroutine of its own, recording how each stream ended. It answers SETTINGS and
// PING as any client does, so that the server keeps the connection (keepalive holds).
type grpcRaw struct {
	t    testing.TB
	conn net.Conn

	wmu  sync.Mutex // the framer's write side and the encoder
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32 // next stream id

	closed chan struct{} // closed when the read side failed: the server closed the connection
	done   chan struct{} // closed when the reader returned

	mu struct {
		sync.Mutex
		ended map[uint32]string // stream → "status:<grpc-status>" or "rst:<code>"
		data  map[uint32]int    // stream → DATA frames received
		// The server's flow control of what the client sends: the client respects it, or the
		// server would reset its streams (FLOW_CONTROL_ERROR) before the attack does anything.
		win     map[uint32]int64
		connWin int64
		initWin int64
	}
	winCh   chan struct{} // signalled when window is granted
	pongs   chan [8]byte  // PING acknowledgements
	goaways atomic.Int32
}

// grpcRawOptions shape the client.
type grpcRawOptions struct {
	// local is the loopback address to dial from (default 127.0.0.1); attackers use others of
	// 127.0.0.0/8, which Linux routes to lo, so that per-peer caps tell them from the
	// well-behaved client.
	local string
	// streamWindow is the initial window the client grants each stream for the server's DATA
	// (SETTINGS_INITIAL_WINDOW_SIZE): 0 is a client that never takes its answers. -1: 1 GiB.
	streamWindow int
}

// grpcDialRaw connects to addr, sends the preface and SETTINGS, and starts the reader. The
// connection is closed at the end of the test.
func grpcDialRaw(t testing.TB, addr string, o grpcRawOptions) *grpcRaw {
	t.Helper()
	c, err := grpcTryDialRaw(addr, o)
	if err != nil {
		t.Fatal(err)
	}
	c.t = t
	t.Cleanup(c.close)
	return c
}

// grpcTryDialRaw is grpcDialRaw for callers that expect refusals; the caller closes it.
func grpcTryDialRaw(addr string, o grpcRawOptions) (*grpcRaw, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if o.local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.local)}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &grpcRaw{conn: conn, next: 1, closed: make(chan struct{}), done: make(chan struct{}), winCh: make(chan struct{}, 1),
		pongs: make(chan [8]byte, 16)}
	c.mu.ended = map[uint32]string{}
	c.mu.data = map[uint32]int{}
	c.mu.win = map[uint32]int64{}
	c.mu.connWin, c.mu.initWin = 65535, 65535
	c.fr = http2.NewFramer(conn, conn)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.enc = hpack.NewEncoder(&c.hbuf)
	win := uint32(1 << 30)
	if o.streamWindow >= 0 {
		win = uint32(o.streamWindow)
	}
	// Write errors mean that the server closed the connection already (a refusal), which the
	// reader reports.
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err == nil {
		if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: win}); err == nil {
			// The connection window is granted in full at once: only stream windows are withheld.
			c.fr.WriteWindowUpdate(0, 1<<30)
		}
	}
	go c.read()
	return c, nil
}

func (c *grpcRaw) close() {
	c.conn.Close()
	<-c.done
}

func (c *grpcRaw) read() {
	defer close(c.done)
	defer close(c.closed)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					c.mu.Lock()
					for id := range c.mu.win {
						c.mu.win[id] += int64(v) - c.mu.initWin
					}
					c.mu.initWin = int64(v)
					c.mu.Unlock()
					c.granted()
				}
				c.write(func() error { return c.fr.WriteSettingsAck() })
			}
		case *http2.WindowUpdateFrame:
			c.mu.Lock()
			if f.StreamID == 0 {
				c.mu.connWin += int64(f.Increment)
			} else if _, ok := c.mu.win[f.StreamID]; ok {
				c.mu.win[f.StreamID] += int64(f.Increment)
			}
			c.mu.Unlock()
			c.granted()
		case *http2.PingFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WritePing(true, f.Data) })
			} else {
				select {
				case c.pongs <- f.Data:
				default:
				}
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				c.end(f.StreamID, "status:"+f.PseudoValue("status")+"/"+grpcStatusOf(f))
			}
		case *http2.RSTStreamFrame:
			c.end(f.StreamID, "rst:"+f.ErrCode.String())
		case *http2.DataFrame:
			c.mu.Lock()
			c.mu.data[f.StreamID]++
			c.mu.Unlock()
			if f.StreamEnded() {
				c.end(f.StreamID, "data-end")
			}
		case *http2.GoAwayFrame:
			c.goaways.Add(1)
		}
	}
}

func grpcStatusOf(f *http2.MetaHeadersFrame) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == "grpc-status" {
			return hf.Value
		}
	}
	return "?"
}

func (c *grpcRaw) end(id uint32, how string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.ended[id]; !ok {
		c.mu.ended[id] = how
	}
}

func (c *grpcRaw) granted() {
	select {
	case c.winCh <- struct{}{}:
	default:
	}
}

// errNoWindow: the server granted no window for within the wait: it stopped reading.
var errNoWindow = errors.New("no flow-control window")

// takeWindow waits up to wait for window on stream id and takes up to n bytes of it.
func (c *grpcRaw) takeWindow(id uint32, n int, wait time.Duration) (int, error) {
	deadline := time.Now().Add(wait)
	for {
		c.mu.Lock()
		k := min(int64(n), c.mu.connWin, c.mu.win[id])
		if k > 0 {
			c.mu.connWin -= k
			c.mu.win[id] -= k
			c.mu.Unlock()
			return int(k), nil
		}
		c.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return 0, errNoWindow
		}
		t := time.NewTimer(left)
		select {
		case <-c.winCh:
		case <-c.closed:
			t.Stop()
			return 0, net.ErrClosed
		case <-t.C:
		}
		t.Stop()
	}
}

// write runs one framer write under the write lock; errors are the reader's to notice.
func (c *grpcRaw) write(f func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return f()
}

// grpcHeaders are the request headers of a gRPC call of method, as grpc-go sends them.
func grpcHeaders(method string) []hpack.HeaderField {
	return []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: "otlpgate"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}
}

const (
	grpcOTEPStream = "/otlpgate.otep.v1.StreamExporter/ExportTraces"
	grpcV1Export   = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
)

// open starts a new stream with the given header fields (split into CONTINUATION frames past
// 16 KiB) and returns its id; endStream half-closes it at once.
func (c *grpcRaw) open(fields []hpack.HeaderField, endStream bool) (uint32, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	id := c.next
	c.next += 2
	c.mu.Lock()
	c.mu.win[id] = c.mu.initWin
	c.mu.Unlock()
	c.hbuf.Reset()
	for _, f := range fields {
		if err := c.enc.WriteField(f); err != nil {
			return 0, err
		}
	}
	block := c.hbuf.Bytes()
	const frame = 16 << 10
	first := block[:min(len(block), frame)]
	rest := block[len(first):]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
		EndStream: endStream, EndHeaders: len(rest) == 0}); err != nil {
		return 0, err
	}
	for len(rest) > 0 {
		part := rest[:min(len(rest), frame)]
		rest = rest[len(part):]
		if err := c.fr.WriteContinuation(id, len(rest) == 0, part); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// send writes one gRPC message (the 5-byte prefix and msg) on stream id, in DATA frames of at
// most 16 KiB, as the server's flow control allows; errNoWindow when the server granted none
// for a second.
func (c *grpcRaw) send(id uint32, msg []byte, endStream bool) error {
	n := len(msg)
	hdr := []byte{0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	return c.sendBytes(id, append(hdr, msg...), endStream)
}

// sendBytes writes b as DATA on stream id, whatever it holds, as flow control allows.
func (c *grpcRaw) sendBytes(id uint32, b []byte, endStream bool) error {
	for {
		k, err := c.takeWindow(id, min(len(b), 16<<10), time.Second)
		if err != nil {
			return err
		}
		part := b[:k]
		b = b[k:]
		if err := c.write(func() error { return c.fr.WriteData(id, endStream && len(b) == 0, part) }); err != nil {
			return err
		}
		if len(b) == 0 {
			return nil
		}
	}
}

// sync sends a PING and waits up to within for its acknowledgement: the server reads frames in
// order, so by then it has read every frame sent before. False when none came.
func (c *grpcRaw) sync(within time.Duration) bool {
	data := [8]byte{'s', 'y', 'n', 'c', byte(c.next), byte(c.next >> 8), byte(c.next >> 16), byte(c.next >> 24)}
	if c.write(func() error { return c.fr.WritePing(false, data) }) != nil {
		return false
	}
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		select {
		case d := <-c.pongs:
			if d == data {
				return true
			}
		case <-c.closed:
			return false
		case <-t.C:
			return false
		}
	}
}

// reset sends RST_STREAM(CANCEL) for id.
func (c *grpcRaw) reset(id uint32) error {
	return c.write(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeCancel) })
}

// ended returns how stream id ended, "" while it is open.
func (c *grpcRaw) ended(id uint32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.ended[id]
}

// endings counts the streams that ended, by how.
func (c *grpcRaw) endings() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for _, how := range c.mu.ended {
		m[how]++
	}
	return m
}

// isClosed reports whether the server closed the connection.
func (c *grpcRaw) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// grpcOTEPRequest is an OTEP trace request carrying only its id: valid, and admitted without a
// batch (it holds no resource entry), so it is the cheapest request that earns an answer.
func grpcOTEPRequest(id uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), id)
}

// grpcWaitFor polls cond every 20 ms until it holds or within passes; false when it never did.
func grpcWaitFor(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// grpcGoroutines reads go_goroutines from the gate's /metrics.
func grpcGoroutines(t testing.TB, g *gate) int {
	t.Helper()
	v := g.metric(t, "go_goroutines")
	if v < 0 {
		t.Fatal("go_goroutines not exported")
	}
	return int(v)
}

// grpcPeer returns the i-th attacker address of 127.0.0.0/8 (127.0.1.i): never the
// well-behaved client's 127.0.0.1.
func grpcPeer(i int) string { return "127.0.1." + strconv.Itoa(1+i%250) }

// grpcOTEPSpansRequest is an OTEP trace request with one resource entry of one span: admitted
// into a batch, so that with -ack=upstream its answer waits for delivery.
func grpcOTEPSpansRequest(t testing.TB, id uint64) []byte {
	t.Helper()
	v1, err := otlpgen.New(id).Spans(otlpgen.Shape{Spans: 1, Attrs: 1}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	// One v1 entry is field 1; OTEP carries entries at field 2, after the id.
	if len(v1) == 0 || v1[0] != 0x0a {
		t.Fatalf("unexpected v1 body %x", v1[:min(len(v1), 8)])
	}
	v1[0] = 0x12
	return append(grpcOTEPRequest(id), v1...)
}
