package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gw "github.com/otlpgate/otlpgate/internal/gateway"
	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
	"github.com/otlpgate/otlpgate/spool"
)

// With -spool.sync=interval, requests are acknowledged after write(2); when the interval sync
// then fails, they may be gone, and the spool must not sync the segment again and trust it.
// otlpgate stops by itself, with the loss error (exit status 3) and a log line that says what
// happened. The disk is a CrashFS failing every sync once the first request was answered.
func TestSpoolFailedSyncStopsTheProcess(t *testing.T) {
	dir := t.TempDir()
	cfg := defaultConfig()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerFlags(fs, &cfg)
	if err := fs.Parse([]string{"-grpc.listen", anyPort, "-http.listen", "", "-admin.listen", anyPort,
		"-uds.listen", filepath.Join(dir, "oc.sock"), "-file.path", filepath.Join(dir, "otlp.jsonl"),
		"-spool.dir", "/spool", "-spool.sync", "interval", "-spool.sync-interval", "10ms", "-shutdown.timeout", "5s"}); err != nil {
		t.Fatal(err)
	}
	if err := finishConfig(&cfg); err != nil {
		t.Fatal(err)
	}
	disk := spool.NewCrashFS()
	cfg.gw.SpoolFS = disk
	logs := &testkit.LockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	served := make(chan error, 1)
	go func() { served <- serve(context.Background(), cfg, configSource{}, log) }()
	grpcAddr := testkit.WaitAddrs(t, logs.String, nil, listenlog.GRPC)[0]

	conn, cerr := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if cerr != nil {
		t.Fatal(cerr)
	}
	defer conn.Close()
	l := newLoader(5, otlpgen.Shape{Spans: 2, Attrs: 1})
	send := func() (*otepv1.ExportResponse, error) {
		req, _ := l.next()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return otepv1.NewUnaryExporterClient(conn).ExportTraces(ctx, req, grpc.WaitForReady(true))
	}
	// The first request creates the segment while syncs work.
	if resp, err := send(); err != nil || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("first request: %v %v", resp, err)
	}
	disk.SetSyncErr(syscall.EIO)
	// If the first was synced already, the second is acknowledged after write(2) and the next
	// interval sync fails on it; if not, that sync fails on the first, and the second may find
	// the spool failed already. Either answer is right.
	send()

	var err error
	select {
	case err = <-served:
	case <-time.After(30 * time.Second):
		t.Fatalf("still serving 30s after every sync began to fail:\n%s", logs.String())
	}
	var lost *gw.LossError
	if !errors.As(err, &lost) || !strings.Contains(err.Error(), spool.ErrSyncFailed.Error()) {
		t.Fatalf("serve returned %v, want the loss error naming the failed sync", err)
	}
	if !strings.Contains(logs.String(), "spool failed: acknowledged data may be lost") {
		t.Fatalf("no log line says the spool failed:\n%s", logs.String())
	}
}
