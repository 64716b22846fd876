package grpcserver

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// A server shut down right after it started, as when another intake of the process fails to
// bind, logs no error of its own: the only error a user sees is the one that stopped otlpgate.
// Before, grpc-go's "the server has been stopped", returned when the shutdown came before
// Serve began, was logged as the server stopping on an error.
func TestShutdownRightAfterStartLogsNoError(t *testing.T) {
	rec := &testkit.Recorder{}
	p, err := pipeline.New(pipeline.DefaultConfig(), []pipeline.Destination{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var log testkit.LockedBuffer
	for range 50 {
		cfg := DefaultConfig()
		cfg.Listen = "127.0.0.1:0"
		srv, err := New(cfg, p, slog.New(slog.NewTextHandler(&log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(log.String(), "level=ERROR"); n != 0 {
		t.Fatalf("%d error lines logged by 50 starts and shutdowns:\n%s", n, log.String())
	}
}
