package grpcserver

import (
	"bytes"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawH2 is a bare HTTP/2 client for the tests that need to misbehave below gRPC: withhold window,
// leave a message unfinished, connect from another loopback address.
type rawH2 struct {
	conn   net.Conn
	mu     sync.Mutex
	fr     *http2.Framer
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	next   uint32
	closed chan struct{} // closed when the server closed the connection
	wins   chan uint32   // streams the server granted window to
	ends   chan h2End    // streams the server ended: trailers (END_STREAM on HEADERS) or RST_STREAM
	dec    *hpack.Decoder
	got    struct {
		sync.Mutex
		data map[uint32][]byte // the DATA payloads the server sent, by stream
	}
}

// h2End is a stream the server ended: its grpc-status (trailers), or the code of its reset.
type h2End struct {
	id     uint32
	status string
	reset  bool
	code   http2.ErrCode
}

// dialH2 connects from local (empty: any) to addr, over TLS when tc is set, and grants the
// server streamWindow bytes of window per stream for its answers.
func dialH2(t *testing.T, addr, local string, tc *tls.Config, streamWindow uint32) *rawH2 {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	var conn net.Conn
	var err error
	if tc != nil {
		tc = tc.Clone()
		tc.NextProtos = []string{"h2"}
		conn, err = tls.DialWithDialer(d, "tcp", addr, tc)
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := &rawH2{conn: conn, next: 1, closed: make(chan struct{}), wins: make(chan uint32, 1024), ends: make(chan h2End, 1024)}
	var status string
	c.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == "grpc-status" {
			status = f.Value
		}
	})
	c.fr = http2.NewFramer(conn, conn)
	c.enc = hpack.NewEncoder(&c.hbuf)
	conn.Write([]byte(http2.ClientPreface))
	c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.closed)
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					c.mu.Lock()
					c.fr.WriteSettingsAck()
					c.mu.Unlock()
				}
			case *http2.HeadersFrame:
				status = ""
				c.dec.Write(f.HeaderBlockFragment())
				if f.StreamEnded() {
					select {
					case c.ends <- h2End{id: f.StreamID, status: status}:
					default:
					}
				}
			case *http2.DataFrame:
				c.got.Lock()
				if c.got.data == nil {
					c.got.data = map[uint32][]byte{}
				}
				c.got.data[f.StreamID] = append(c.got.data[f.StreamID], f.Data()...)
				c.got.Unlock()
			case *http2.RSTStreamFrame:
				select {
				case c.ends <- h2End{id: f.StreamID, reset: true, code: f.ErrCode}:
				default:
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID != 0 {
					select {
					case c.wins <- f.StreamID:
					default:
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return c
}

// open starts a stream of method and returns its id.
func (c *rawH2) open(t *testing.T, method string) uint32 {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next += 2
	c.hbuf.Reset()
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: method},
		{Name: ":authority", Value: "otlpgate"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	} {
		c.enc.WriteField(f)
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	return id
}

// data sends b on stream id as one DATA frame (at most 16 KiB, within the initial window).
func (c *rawH2) data(t *testing.T, id uint32, b []byte) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fr.WriteData(id, false, b); err != nil {
		t.Fatal(err)
	}
}

// dataEnd sends b on stream id as one DATA frame that ends the client's side.
func (c *rawH2) dataEnd(t *testing.T, id uint32, b []byte) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fr.WriteData(id, true, b); err != nil {
		t.Fatal(err)
	}
}

// received returns the DATA bytes the server sent on stream id so far.
func (c *rawH2) received(id uint32) []byte {
	c.got.Lock()
	defer c.got.Unlock()
	return append([]byte(nil), c.got.data[id]...)
}

// grant gives the server n bytes of window on stream id.
func (c *rawH2) grant(t *testing.T, id, n uint32) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fr.WriteWindowUpdate(id, n); err != nil {
		t.Fatal(err)
	}
}

// waitEnd waits (boundedly) for the next stream the server ends.
func (c *rawH2) waitEnd(t *testing.T) h2End {
	t.Helper()
	select {
	case e := <-c.ends:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no stream ended within 30s")
	}
	return h2End{}
}

// waitWindow waits (boundedly) until the server granted each of ids window: their handlers
// began reading messages larger than the initial window.
func (c *rawH2) waitWindow(t *testing.T, ids ...uint32) {
	t.Helper()
	want := map[uint32]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case got := <-c.wins:
			delete(want, got)
		case <-deadline:
			t.Fatalf("no window granted to streams %v", want)
		}
	}
}

// waitClosed waits (boundedly) for the server to close the connection.
func (c *rawH2) waitClosed(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(within):
		t.Fatalf("connection still open after %v", within)
	}
}

func (c *rawH2) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}
