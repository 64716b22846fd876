package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/bench"
)

func cmdSoak(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	gate := fs.String("gate", "./bin/otlpgate", "otlpgate binary")
	dur := fs.Duration("duration", 10*time.Minute, "how long the mixed load runs")
	every := fs.Duration("every", 10*time.Second, "sampling interval")
	repo := fs.String("repo", ".", "repository root (for the captures replayed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := bench.RunSoak(ctx, bench.SoakConfig{Gate: *gate, Duration: *dur, Every: *every, Repo: *repo}, os.Stdout)
	bench.WriteSoak(os.Stdout, s)
	return err
}
