package client

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/h2"
)

// rawStreamUpstream is an OTEP StreamExporter server written on internal/h2 for the own
// client's stream tests: it reads the gRPC messages of every stream, answers each with Success
// at once (from bytes appended to one output buffer: nothing allocated per request unless keep
// records them), and can, on its first connection, hold answers, send GOAWAY or RST_STREAM at
// a chosen request, and hold the client to a small flow-control window, which a grpc-go server
// cannot be made to do at a chosen point.
type rawStreamUpstream struct {
	t  testing.TB
	ln net.Listener
	wg sync.WaitGroup

	// On the first connection: answer only the first answerFirst requests (0: all), and when
	// cutAt requests were read, do cut.
	answerFirst int
	cutAt       int
	cut         rawCut
	// window, when set, is the SETTINGS_INITIAL_WINDOW_SIZE the server gives the client's
	// streams; the server credits what it read after each read.
	window uint32

	mu struct {
		sync.Mutex
		conns      int
		keep       bool
		got        []rawGot
		answered   int
		violations []string
		maxData    int // the largest DATA frame read
	}
}

// rawCut is what the upstream does on its first connection at cutAt.
type rawCut int

const (
	// cutGoAwayClose: GOAWAY naming the newest stream as processed, then the connection
	// closes (a server that stops with requests unanswered).
	cutGoAwayClose rawCut = iota + 1
	// cutGoAwayRefuse: GOAWAY with last stream 0, and nothing answered any more: the client's
	// streams were not processed.
	cutGoAwayRefuse
	// cutGoAwayGraceful: GOAWAY naming the newest stream, which is served to its end; the
	// connection closes once no stream is left.
	cutGoAwayGraceful
	// cutReset: RST_STREAM(CANCEL) of the stream the request came on; the connection stays.
	cutReset
	// cutSilent: the connection reads on and never writes again, PING answers included.
	cutSilent
)

// rawGot is one request as the upstream read it.
type rawGot struct {
	conn   int
	stream uint32
	id     uint64
	tag    string
	body   []byte
}

func newRawStreamUpstream(t testing.TB, keep bool) *rawStreamUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawStreamUpstream{t: t, ln: ln}
	u.mu.keep = keep
	t.Cleanup(u.close)
	return u
}

// start serves; the test sets the knobs before.
func (u *rawStreamUpstream) start() *rawStreamUpstream {
	u.wg.Add(1)
	go u.accept()
	return u
}

func (u *rawStreamUpstream) addr() string { return u.ln.Addr().String() }

func (u *rawStreamUpstream) close() {
	u.ln.Close()
	u.wg.Wait()
}

func (u *rawStreamUpstream) accept() {
	defer u.wg.Done()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		conns = append(conns, c)
		u.mu.Lock()
		u.mu.conns++
		n := u.mu.conns
		u.mu.Unlock()
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			defer c.Close()
			u.serve(c, n)
		}()
	}
}

// rawBidi is a stream being served.
type rawBidi struct {
	id     uint32
	buf    []byte // message bytes not yet whole
	owed   int    // DATA bytes read and not yet credited back
	headed bool   // the answer's headers went
}

func (u *rawStreamUpstream) violation(format string, args ...any) {
	u.mu.Lock()
	u.mu.violations = append(u.mu.violations, fmt.Sprintf(format, args...))
	u.mu.Unlock()
}

func (u *rawStreamUpstream) serve(c net.Conn, conn int) {
	first := conn == 1
	buf := make([]byte, 0, 1<<20)
	out := make([]byte, 0, 64<<10)
	if _, err := io.ReadFull(c, buf[:len(h2.ClientPreface)]); err != nil {
		return
	}
	window := u.window
	if window == 0 {
		window = h2DefaultWindow
	} else {
		out = appendSettings(out, []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: window}})
	}
	if window == h2DefaultWindow {
		out = h2.AppendFrameHeader(out, h2.FrameHeader{Type: http2.FrameSettings})
	}
	if _, err := c.Write(out); err != nil {
		return
	}
	streams := make([]*rawBidi, 0, 16)
	free := make([]*rawBidi, 0, 16)
	connOwed := 0
	read, answered := 0, 0
	goneAway, silent := false, false
	var lastID uint32 // the last stream of a graceful GOAWAY sent, 0 before
	find := func(id uint32) int {
		for i, s := range streams {
			if s.id == id {
				return i
			}
		}
		return -1
	}
	drop := func(i int) {
		s := streams[i]
		streams[i] = streams[len(streams)-1]
		streams = streams[:len(streams)-1]
		s.buf, s.owed, s.headed = s.buf[:0], 0, false
		free = append(free, s)
	}
	for {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		out = out[:0]
		off := 0
		closeNow := false
	frames:
		for {
			f, fn, ferr := h2.NextFrame(buf[off:], h2.MaxFrameSizeLimit)
			if ferr != nil || fn == 0 {
				break
			}
			off += fn
			switch f.Type {
			case http2.FrameSettings:
				if !f.Has(http2.FlagSettingsAck) {
					out = h2.AppendFrameHeader(out, h2.FrameHeader{Type: http2.FrameSettings, Flags: http2.FlagSettingsAck})
				}
			case http2.FramePing:
				if !f.Has(http2.FlagPingAck) {
					out = h2.AppendFrameHeader(out, h2.FrameHeader{Length: 8, Type: http2.FramePing, Flags: http2.FlagPingAck})
					out = append(out, f.Payload...)
				}
			case http2.FrameHeaders:
				if lastID != 0 && f.StreamID > lastID {
					continue // after GOAWAY: not processed
				}
				var s *rawBidi
				if k := len(free); k > 0 {
					s, free = free[k-1], free[:k-1]
				} else {
					s = &rawBidi{buf: make([]byte, 0, 64<<10)}
				}
				s.id = f.StreamID
				streams = append(streams, s)
			case http2.FrameRSTStream:
				if i := find(f.StreamID); i >= 0 {
					drop(i)
				}
			case http2.FrameData:
				i := find(f.StreamID)
				if i < 0 {
					continue
				}
				s := streams[i]
				u.mu.Lock()
				u.mu.maxData = max(u.mu.maxData, int(f.Length))
				u.mu.Unlock()
				s.owed += int(f.Length)
				connOwed += int(f.Length)
				if s.owed > int(window) || connOwed > h2DefaultWindow {
					u.violation("stream %d: %d bytes past the window %d (connection: %d)", s.id, s.owed, window, connOwed)
				}
				s.buf = append(s.buf, f.Payload...)
				for len(s.buf) >= 5 {
					l := int(binary.BigEndian.Uint32(s.buf[1:5]))
					if len(s.buf) < 5+l {
						break
					}
					msg := s.buf[5 : 5+l]
					id := u.record(conn, s.id, msg)
					s.buf = s.buf[:copy(s.buf, s.buf[5+l:])]
					// The knobs are about the first stream of the first connection.
					scripted := first && s.id == 1
					if scripted {
						read++
					}
					cutNow := scripted && read == u.cutAt
					if cutNow && u.cut == cutGoAwayGraceful {
						// Before the answer: the client knows of it once the answer came.
						lastID = s.id
						out = appendGoAway(out, lastID)
					}
					if !goneAway && !silent && (!scripted || u.answerFirst == 0 || answered < u.answerFirst) {
						if scripted {
							answered++
						}
						out = u.answer(out, s, id)
					}
					if !cutNow {
						continue
					}
					switch u.cut {
					case cutGoAwayClose:
						out = appendGoAway(out, s.id)
						closeNow = true
						break frames
					case cutGoAwayRefuse:
						out = appendGoAway(out, 0)
						goneAway = true
					case cutSilent:
						silent = true
					case cutReset:
						out = h2.AppendFrameHeader(out, h2.FrameHeader{Length: 4, Type: http2.FrameRSTStream, StreamID: s.id})
						out = binary.BigEndian.AppendUint32(out, uint32(http2.ErrCodeCancel))
						drop(i)
						continue frames
					}
				}
				if f.Has(http2.FlagDataEndStream) {
					if !goneAway {
						if !s.headed {
							out = rawAnswerHeaders.Append(out, s.id)
						}
						out = rawAnswerTrailer.Append(out, s.id)
					}
					drop(i)
					if first && u.cut == cutGoAwayGraceful && read >= u.cutAt && len(streams) == 0 {
						closeNow = true
					}
				}
			}
		}
		buf = buf[:copy(buf, buf[off:])]
		// Credit back what was read, the connection's and each stream's.
		if connOwed > 0 && !closeNow {
			out = appendWindowUpdate(out, 0, uint32(connOwed))
			connOwed = 0
		}
		for _, s := range streams {
			if s.owed > 0 && !closeNow {
				out = appendWindowUpdate(out, s.id, uint32(s.owed))
				s.owed = 0
			}
		}
		if len(out) > 0 && !silent {
			if _, werr := c.Write(out); werr != nil {
				return
			}
		}
		if err != nil || closeNow {
			return
		}
	}
}

func appendGoAway(out []byte, last uint32) []byte {
	out = h2.AppendFrameHeader(out, h2.FrameHeader{Length: 8, Type: http2.FrameGoAway})
	out = binary.BigEndian.AppendUint32(out, last)
	return binary.BigEndian.AppendUint32(out, uint32(http2.ErrCodeNo))
}

// record notes a request read on a stream and returns its id.
func (u *rawStreamUpstream) record(conn int, stream uint32, msg []byte) uint64 {
	var id uint64
	if len(msg) > 1 && msg[0] == tagID {
		id, _ = protowire.ConsumeVarint(msg[1:])
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.mu.keep {
		return id
	}
	body, id2, err := fastpath.AppendV1(nil, msg)
	if err != nil || id2 != id {
		u.mu.violations = append(u.mu.violations, fmt.Sprintf("undecodable OTEP request: %v", err))
	}
	u.mu.got = append(u.mu.got, rawGot{conn: conn, stream: stream, id: id, tag: tagOf(body), body: body})
	return id
}

// answer appends the answer to request id on s: the stream's headers first if they did not go
// yet, then an ExportResponse naming id with Success.
func (u *rawStreamUpstream) answer(out []byte, s *rawBidi, id uint64) []byte {
	u.mu.Lock()
	u.mu.answered++
	u.mu.Unlock()
	if !s.headed {
		s.headed = true
		out = rawAnswerHeaders.Append(out, s.id)
	}
	l := 1 + protowire.SizeVarint(id)
	out = h2.AppendFrameHeader(out, h2.FrameHeader{Length: uint32(5 + l), Type: http2.FrameData, StreamID: s.id})
	out = append(out, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(l))
	out = append(out, tagID)
	return protowire.AppendVarint(out, id)
}

func (u *rawStreamUpstream) got() []rawGot {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]rawGot(nil), u.mu.got...)
}

func (u *rawStreamUpstream) checkViolations() {
	u.t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, v := range u.mu.violations {
		u.t.Error(v)
	}
}
