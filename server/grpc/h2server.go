package grpcserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/otlpgate/otlpgate/internal/h2"
)

// The transports of the gRPC intake (-grpc.transport).
const (
	// TransportGRPCGo serves every method on grpc-go.
	TransportGRPCGo = "grpc-go"
	// TransportOwn serves the three v1 Export methods and the OTEP UnaryExporter and
	// StreamExporter on otlpgate's own HTTP/2 transport (internal/h2); any other method is
	// answered UNIMPLEMENTED. The default.
	TransportOwn = "otlpgate"
)

// h2Server is the part of the Server that runs otlpgate's own transport: its bounds, worked
// out once, and its connections.
type h2Server struct {
	decCfg   h2.Config
	maxFrame uint32      // the SETTINGS_MAX_FRAME_SIZE advertised
	maxBlock int         // the bound of one header block as sent (HEADERS and its CONTINUATIONs)
	readSize int         // the read buffer of a connection
	tls      *tls.Config // nil: h2c with prior knowledge
	wg       sync.WaitGroup
	mu       struct {
		sync.Mutex
		conns map[*h2Conn]struct{}
		stop  bool
	}
}

// h2Keep are the fields the transport reads of a call's headers: a gRPC server's, those that
// make a request malformed as grpc-go's server finds it (h2Stream.open), the bearer token,
// and the tenant headers.
var h2Keep = []string{
	":method", ":scheme", ":path", ":authority", ":status", "content-type", "te", "grpc-encoding", "grpc-timeout",
	"content-length", "authorization", "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
}

func (h *h2Server) init(cfg *Config, tc *tls.Config) error {
	if tc != nil {
		h.tls = tc.Clone()
		h.tls.NextProtos = []string{"h2"}
	}
	keep := append([]string(nil), h2Keep...)
	if cfg.Tenants != nil {
	next:
		for _, n := range cfg.Tenants.Headers() {
			for _, k := range keep {
				if k == n {
					continue next
				}
			}
			keep = append(keep, n)
		}
	}
	h.decCfg = h2.Config{
		HeaderTableSize:   4096,
		MaxHeaderListSize: uint32(min(cfg.MaxHeaderBytes, 1<<20)),
		Keep:              keep,
		MaxKeptFields:     64,
		Request:           true,
		Binary:            true,
	}
	if err := h.decCfg.Validate(); err != nil {
		return fmt.Errorf("grpc: -grpc.transport=otlpgate: %w", err)
	}
	// The least frame size, 16 KiB, advertised as such: the clients that matter (grpc-go's,
	// the SDKs on it) write no larger frames whatever a server allows, and a read of the
	// buffer takes in many.
	h.maxFrame = h2.DefaultMaxFrameSize
	h.readSize = max(cfg.ReadBufferSize, 2*(int(h.maxFrame)+h2.FrameHeaderLen))
	// A block as sent is rarely longer than the list it decodes to; Huffman coding can make a
	// string up to 30 bits an octet.
	h.maxBlock = 4*int(h.decCfg.MaxHeaderListSize) + 1<<10
	h.mu.conns = map[*h2Conn]struct{}{}
	return nil
}

// add registers c, false once the server stopped.
func (h *h2Server) add(c *h2Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.stop {
		return false
	}
	h.mu.conns[c] = struct{}{}
	h.wg.Add(1)
	return true
}

func (h *h2Server) remove(c *h2Conn) {
	h.mu.Lock()
	delete(h.mu.conns, c)
	h.mu.Unlock()
	h.wg.Done()
}

// each calls f for every open connection.
func (h *h2Server) each(f func(*h2Conn)) {
	h.mu.Lock()
	cs := make([]*h2Conn, 0, len(h.mu.conns))
	for c := range h.mu.conns {
		cs = append(cs, c)
	}
	h.mu.Unlock()
	for _, c := range cs {
		f(c)
	}
}

// serveH2 accepts connections on ln for the own transport, each served on its goroutine,
// until ln closes; it returns once every connection ended.
func (s *Server) serveH2(ln net.Listener) {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			break
		}
		delay = 0
		c := s.newH2Conn(nc)
		if !s.h2.add(c) {
			c.discard()
			continue
		}
		go c.serve()
	}
	s.h2.mu.Lock()
	s.h2.mu.stop = true
	s.h2.mu.Unlock()
	s.h2.wg.Wait()
}

// shutdownH2 is Shutdown for the own transport: no new connections, a two-phase GOAWAY on
// every open one, which closes once its calls are answered; those still open when ctx ends
// are closed.
func (s *Server) shutdownH2(ctx context.Context) error {
	(*s.ln.Load()).Close()
	// No connection joins after this (one accepted meanwhile is closed), so every one is
	// told by the loop below.
	s.h2.mu.Lock()
	s.h2.mu.stop = true
	s.h2.mu.Unlock()
	// Two phases per connection: the GOAWAY that admits every stream and its PING (the last
	// GOAWAY follows the PING's ACK), and every OTEP stream ended after the answers it owes,
	// as grpc-go's path ends them (drain.go); the connection closes once its calls are done.
	s.h2.each(func(c *h2Conn) {
		c.goAway()
		c.drainStreams()
	})
	var err error
	select {
	case <-s.served:
	case <-ctx.Done():
		s.h2.each(func(c *h2Conn) { c.raw.Close() })
		<-s.served
		err = fmt.Errorf("grpc: calls still open when the shutdown deadline passed were cut: %w", ctx.Err())
	}
	return err
}
