package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/otlpgate/otlpgate/bench"
)

// policiesFlag collects -policy values, name:flags.
type policiesFlag []bench.BatchPolicy

func (p *policiesFlag) String() string { return fmt.Sprint(*p) }
func (p *policiesFlag) Set(s string) error {
	name, args, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return fmt.Errorf("want name:flags, got %q", s)
	}
	pol := bench.BatchPolicy{Name: name, Args: strings.Fields(args)}
	if len(pol.Args) > 0 && strings.HasPrefix(pol.Args[0], "gate=") {
		pol.Gate, pol.Args = strings.TrimPrefix(pol.Args[0], "gate="), pol.Args[1:]
	}
	*p = append(*p, pol)
	return nil
}

// defaultPolicies are the batch policies compared unless -policy names others: eager sealing
// alone (the default before -batch.min-gap), the default, and sealing by size and age only.
var defaultPolicies = []bench.BatchPolicy{
	{Name: "min-gap=0", Args: []string{"-batch.min-gap=0"}},
	{Name: "default"},
	{Name: "eager=false", Args: []string{"-batch.eager=false"}},
}

func cmdBatching(args []string) error {
	fs := flag.NewFlagSet("batching", flag.ContinueOnError)
	gate := fs.String("gate", "./bin/otlpgate", "otlpgate binary")
	var policies policiesFlag
	fs.Var(&policies, "policy", "a batch policy to compare, name:flags, the flags optionally led by gate=BINARY to run another otlpgate build (repeatable; default min-gap=0:-batch.min-gap=0, default:, eager=false:-batch.eager=false)")
	repeat := fs.Int("repeat", 2, "rounds; each runs every load under every policy, back to back")
	shape := shapeFlag(fs)
	rates := fs.String("rates", "1000,2000", "gRPC batches per second, comma-separated (empty: no gRPC load)")
	seconds := fs.Float64("seconds", 8, "length of each gRPC run at its rate, after a one-second warm-up")
	inflight := fs.Int("inflight", 32, "gRPC calls in flight at most")
	capture := fs.String("capture", "server/uds/testdata/trace_export.bin", "OpenCensus daemon capture holding one trace export, replayed as one export (empty: no UDS load)")
	udsRate := fs.Float64("uds-rate", 9000, "trace exports per second over the socket, in total")
	udsExports := fs.Int("uds-exports", 45000, "trace exports per UDS run, after a warm-up of a tenth")
	udsConns := fs.Int("uds-conns", 4, "socket connections sharing the UDS rate")
	dir := fs.String("logs", os.TempDir(), "directory for otlpgate's logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(policies) == 0 {
		policies = defaultPolicies
	}
	sh, err := parseShape(*shape)
	if err != nil {
		return err
	}
	cfg := bench.BatchingConfig{Gate: *gate, Policies: policies, Repeat: *repeat, Dir: *dir, Shape: sh,
		Seconds: *seconds, InFlight: *inflight, UDSRate: *udsRate, UDSExports: *udsExports, UDSConns: *udsConns}
	for _, r := range strings.FieldsFunc(*rates, func(c rune) bool { return c == ',' }) {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("batching: bad rate %q", r)
		}
		cfg.Rates = append(cfg.Rates, v)
	}
	if *capture != "" {
		if cfg.Capture, err = os.ReadFile(*capture); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.RunBatching(ctx, cfg, os.Stderr)
	fmt.Printf("\nload -> otlpgate -> sink at fixed rates: gRPC unary v1 %s batches (%d spans), UDS trace exports over %d connections; %d rounds\n",
		*shape, sh.Spans, *udsConns, *repeat)
	bench.WriteBatching(os.Stdout, res)
	return err
}
