package httpserver

import (
	"context"
	"log/slog"
	"testing"
)

// Addr may be read (by the admin readiness check) while Start runs: under -race this fails
// when the listener is a plain field.
func TestAddrWhileStarting(t *testing.T) {
	p, done := newPipeline(t)
	defer done()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	srv, err := New(cfg, p, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stop, polled, running := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		_ = srv.Addr()
		close(running)
		for {
			select {
			case <-stop:
				return
			default:
				_ = srv.Addr()
			}
		}
	}()
	<-running
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-polled
	if srv.Addr() == nil {
		t.Fatal("no address after Start")
	}
	srv.Shutdown(context.Background())
}
