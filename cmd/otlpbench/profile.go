package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/otlpgate/otlpgate/bench"
)

func cmdProfile(args []string) error {
	fs := flag.NewFlagSet("profile", flag.ContinueOnError)
	gate := fs.String("gate", "./bin/otlpgate", "otlpgate binary")
	scenario := fs.String("scenario", "small", "small, large (OTLP/gRPC), uds (OpenCensus captures) or kafka (KIP-714 pushes)")
	out := fs.String("out", "profiles", "directory for the captures")
	secs := fs.Int("seconds", 10, "CPU profile length")
	gateArgs := fs.String("gate-args", "", "extra otlpgate flags (space-separated), e.g. \"-spool.dir=/tmp/spool -spool.sync=always\"")
	repo := fs.String("repo", ".", "repository root (for the captures the uds and kafka scenarios replay)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	base, err := bench.RunProfile(ctx, bench.ProfileConfig{Gate: *gate, Scenario: *scenario, Out: *out, Seconds: *secs,
		Repo: *repo, GateArgs: strings.Fields(*gateArgs), Command: "otlpbench profile " + strings.Join(args, " ")}, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Printf("saved %s.{cpu,allocs,heap}.pprof and %s.txt\n", base, base)
	return nil
}
