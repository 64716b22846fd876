package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Listener is an HTTP server of the admin package on an address of its own (the profiling
// listener). Start and Shutdown may be called from any goroutine, each once.
type Listener struct {
	name string
	addr string
	log  *slog.Logger
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

func newListener(name, addr string, readHeader, write time.Duration, h http.Handler, log *slog.Logger) *Listener {
	return &Listener{name: name, addr: addr, log: log, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: readHeader, WriteTimeout: write}}
}

// Start listens and serves in the background; it returns once the listener is bound. A nil
// Listener does nothing.
func (l *Listener) Start() error {
	if l == nil {
		return nil
	}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("%s: cannot listen on %s: %w", l.name, l.addr, err)
	}
	l.ln = ln
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error(l.name+" server stopped", "err", err)
		}
	}()
	l.log.Info(l.name+" listening", "addr", ln.Addr().String())
	return nil
}

// Addr is the bound address, or nil before Start.
func (l *Listener) Addr() net.Addr {
	if l == nil || l.ln == nil {
		return nil
	}
	return l.ln.Addr()
}

// Shutdown stops the server, waiting for open requests up to ctx; a profile in progress is cut
// off when ctx ends.
func (l *Listener) Shutdown(ctx context.Context) error {
	if l == nil || l.ln == nil {
		return nil
	}
	err := l.srv.Shutdown(ctx)
	if err != nil {
		l.srv.Close()
	}
	<-l.done
	return err
}
