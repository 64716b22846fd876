package client

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/otlpgate/otlpgate/internal/h2"
)

// rawUpstream is an HTTP/2 gRPC server written on internal/h2 for the own client's tests: it
// answers every call with an empty ExportResponse from precomputed frames and allocates
// nothing per call (the allocation test counts the whole process), and it can send GOAWAY at
// a chosen point, which grpc-go's server cannot be made to.
type rawUpstream struct {
	t  testing.TB
	ln net.Listener
	wg sync.WaitGroup
	// goAwayAt, when set, makes the first connection wait for that many whole requests, then
	// send GOAWAY naming the lowest of their ids as the last it processes, answer that one only
	// and close.
	goAwayAt int
	// resetFirst, when set, answers the first request with RST_STREAM of that code instead.
	resetFirst http2.ErrCode

	mu struct {
		sync.Mutex
		conns    int
		bodies   map[string]int // tags of the answered requests (keep)
		keep     bool
		answered int
		resets   int
	}
}

func newRawUpstream(t testing.TB, keep bool, goAwayAt int) *rawUpstream {
	return newRawUpstreamReset(t, keep, goAwayAt, 0)
}

func newRawUpstreamReset(t testing.TB, keep bool, goAwayAt int, resetFirst http2.ErrCode) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{t: t, ln: ln, goAwayAt: goAwayAt, resetFirst: resetFirst}
	u.mu.keep = keep
	u.mu.bodies = map[string]int{}
	u.wg.Add(1)
	go u.accept()
	t.Cleanup(u.close)
	return u
}

func (u *rawUpstream) addr() string { return u.ln.Addr().String() }

func (u *rawUpstream) close() {
	u.ln.Close()
	u.wg.Wait()
}

func (u *rawUpstream) accept() {
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
		first := u.mu.conns == 1
		u.mu.Unlock()
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			defer c.Close()
			u.serve(c, first && u.goAwayAt > 0)
		}()
	}
}

var (
	rawAnswerHeaders = mustHeaders(false, h2.GRPCResponseHeaders...)
	rawAnswerTrailer = mustHeaders(true, h2.GRPCTrailersOK...)
)

func mustHeaders(end bool, fs ...h2.HeaderField) *h2.HeadersFrame {
	f, err := h2.NewHeadersFrame(end, fs...)
	if err != nil {
		panic(err)
	}
	return f
}

// rawReq is a request being received.
type rawReq struct {
	id   uint32
	body []byte
}

func (u *rawUpstream) serve(c net.Conn, goAway bool) {
	buf := make([]byte, 0, 1<<20)
	out := make([]byte, 0, 64<<10)
	if _, err := io.ReadFull(c, buf[:len(h2.ClientPreface)]); err != nil {
		return
	}
	out = h2.AppendFrameHeader(out, h2.FrameHeader{Type: http2.FrameSettings})
	if _, err := c.Write(out); err != nil {
		return
	}
	reqs := make([]rawReq, 0, 64)
	var whole []rawReq // goAway: the requests complete so far
	for {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		out = out[:0]
		off := 0
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
				reqs = append(reqs, rawReq{id: f.StreamID})
			case http2.FrameData:
				i := 0
				for i < len(reqs) && reqs[i].id != f.StreamID {
					i++
				}
				if i == len(reqs) {
					continue
				}
				if u.mu.keep {
					reqs[i].body = append(reqs[i].body, f.Payload...)
				}
				if f.Length > 0 { // credit back what was taken, at once
					out = appendWindowUpdate(out, 0, f.Length)
					out = appendWindowUpdate(out, f.StreamID, f.Length)
				}
				if !f.Has(http2.FlagDataEndStream) {
					continue
				}
				r := reqs[i]
				reqs[i] = reqs[len(reqs)-1]
				reqs = reqs[:len(reqs)-1]
				if goAway {
					whole = append(whole, r)
					if len(whole) < u.goAwayAt {
						continue
					}
					first := whole[0] // the lowest id: those above it are refused
					for _, w := range whole {
						if w.id < first.id {
							first = w
						}
					}
					out = h2.AppendFrameHeader(out, h2.FrameHeader{Length: 8, Type: http2.FrameGoAway})
					out = binary.BigEndian.AppendUint32(out, first.id)
					out = binary.BigEndian.AppendUint32(out, uint32(http2.ErrCodeNo))
					out = u.answer(out, first)
					c.Write(out)
					return
				}
				if u.resetFirst != 0 && u.takeReset() {
					out = h2.AppendFrameHeader(out, h2.FrameHeader{Length: 4, Type: http2.FrameRSTStream, StreamID: r.id})
					out = binary.BigEndian.AppendUint32(out, uint32(u.resetFirst))
					continue
				}
				out = u.answer(out, r)
			}
		}
		buf = buf[:copy(buf, buf[off:])]
		if len(out) > 0 {
			if _, werr := c.Write(out); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// answer appends the frames of a successful answer to r: headers, an empty ExportResponse,
// trailers.
func (u *rawUpstream) answer(out []byte, r rawReq) []byte {
	u.mu.Lock()
	u.mu.answered++
	if u.mu.keep && len(r.body) >= 5 {
		u.mu.bodies[tagOf(r.body[5:])]++
	}
	u.mu.Unlock()
	out = rawAnswerHeaders.Append(out, r.id)
	out = h2.AppendFrameHeader(out, h2.FrameHeader{Length: 5, Type: http2.FrameData, StreamID: r.id})
	out = append(out, 0, 0, 0, 0, 0)
	return rawAnswerTrailer.Append(out, r.id)
}

func (u *rawUpstream) tags() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]int{}
	for k, v := range u.mu.bodies {
		out[k] = v
	}
	return out
}

func (u *rawUpstream) conns() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.mu.conns
}

// takeReset reports whether this request is the one to reset.
func (u *rawUpstream) takeReset() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.mu.resets++
	return u.mu.resets == 1
}
