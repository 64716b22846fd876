package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/bench"
	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

func cmdAnchor(args []string) error { return anchorCommand(args, os.Stdout, os.Stderr) }

// anchorCommand runs `otlpbench anchor`: the table goes to stdout, progress and notes to stderr.
func anchorCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("anchor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gate := fs.String("gate", "./bin/otlpgate", "otlpgate binary")
	gateArgs := fs.String("gate-args", "", "extra otlpgate flags (space-separated)")
	top := fs.Bool("top", true, "also measure otlpgate with -grpc.scan-depth=top")
	out := fs.String("out", "grpc", "how otlpgate sends to the sink: grpc (OTLP/gRPC unary v1) or http (OTLP/HTTP protobuf, protocol=http)")
	copyFloor := fs.Bool("copy-floor", true, "also measure the relay copying through a buffer in the process (tcp-relay-copy): the floor of a proxy that reads what it forwards")
	peer := fs.String("peer", "./peer/otelcol/otelcol-peer", "the Collector built by make peer-otelcol; skipped with a message when the file does not exist, \"\" to leave it out")
	peerArgs := fs.String("peer-args", "--config=bench/otelcol/config.yaml", "the peer's arguments (space-separated); it gets PEER_LISTEN, PEER_HTTP_LISTEN, PEER_TARGET and PEER_COMPRESSION")
	intakes := fs.String("intakes", "grpc,http", "intakes to measure: grpc (OTLP/gRPC unary v1), http (OTLP/HTTP protobuf)")
	comps := fs.String("compression", "none,gzip,zstd", "compressions to measure, on both hops: none, gzip, zstd")
	rate := fs.Float64("rate", 100, "batches per second, sent in an open loop")
	duration := fs.Duration("duration", 10*time.Second, "measured sending per cell")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured sending per cell before it")
	// Four batches of 820 KB unanswered means the proxy is several batch times behind; more
	// would only meet otlpgate's budget for one gRPC connection (-intake.max-conn-bytes, four
	// calls of -grpc.max-recv-msg-size) and be refused, where an exporter would wait.
	inflight := fs.Int("max-inflight", 4, "unanswered requests before the open loop waits (and counts the send late)")
	rounds := fs.Int("rounds", 1, "times the whole matrix runs; each cell reports its median round")
	proxyCPU := fs.Int("proxy-cpu", -1, "the CPU the proxies are pinned to (-1: the last this process may use); the load and the sink get the others")
	pin := fs.Bool("pin", true, "pin the proxies to -proxy-cpu and this process to the other CPUs")
	dir := fs.String("logs", os.TempDir(), "directory for the children's logs")
	base := fs.String("base", "", "a second otlpgate binary measured beside -gate in every round (rows otlpgate-base, otlpgate-base-top): before and after a change, under the same other load")
	baseArgs := fs.String("base-args", "", "the -base binary's extra otlpgate flags (space-separated; -gate-args are the other's)")
	destOpts := fs.String("dest-opts", "", "appended to the -gate binary's sink destination (\",write-buffer=1MiB\")")
	baseDestOpts := fs.String("base-dest-opts", "", "appended to the -base binary's sink destination")
	trace := fs.Bool("trace", false, "save a Go execution trace of each otlpgate cell's first measured seconds in -logs and print its goroutine wake-ups, blocks and idle periods per batch (needs the go command)")
	strace := fs.Bool("strace", false, "attach strace(1) to each proxy for the measured phase and print its system calls per batch by kind and size (the CPU figures are then strace's)")
	profile := fs.Bool("profile", false, "save a CPU profile of each otlpgate cell's measured phase in -logs (a later round's replaces an earlier one's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := bench.AnchorConfig{
		Gate: *gate, GateArgs: strings.Fields(*gateArgs), Top: *top, CopyFloor: *copyFloor, Out: *out, PeerArgs: strings.Fields(*peerArgs),
		Shape: otlpgen.Semconv, Intakes: strings.Split(*intakes, ","), Compressions: strings.Split(*comps, ","),
		Rate: *rate, Duration: *duration, Warmup: *warmup, MaxInFlight: *inflight, Rounds: *rounds, Dir: *dir,
		Base: *base, BaseArgs: strings.Fields(*baseArgs),
		DestOpts: *destOpts, BaseDestOpts: *baseDestOpts, Strace: *strace, Trace: *trace, Profile: *profile,
	}
	for _, in := range cfg.Intakes {
		if in != "grpc" && in != "http" {
			return fmt.Errorf("anchor: unknown intake %q (want grpc or http)", in)
		}
	}
	for _, c := range cfg.Compressions {
		if c != "none" && c != "gzip" && c != "zstd" {
			return fmt.Errorf("anchor: unknown compression %q (want none, gzip or zstd)", c)
		}
	}
	if *out != "grpc" && *out != "http" {
		return fmt.Errorf("anchor: unknown -out %q (want grpc or http)", *out)
	}
	if *rate <= 0 || *duration <= 0 || *inflight <= 0 {
		return errors.New("anchor: -rate, -duration and -max-inflight must be positive")
	}
	if _, err := os.Stat(*gate); err != nil {
		return fmt.Errorf("anchor: otlpgate binary: %w (make build)", err)
	}
	if *base != "" {
		if _, err := os.Stat(*base); err != nil {
			return fmt.Errorf("anchor: -base: %w", err)
		}
	}
	if *peer != "" {
		if _, err := os.Stat(*peer); err != nil {
			fmt.Fprintf(stderr, "anchor: no Collector column: %s is not built (make peer-otelcol builds it)\n", *peer)
		} else {
			cfg.Peer = *peer
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.Bench = self
	if *pin {
		if err := pinAnchor(&cfg, *proxyCPU, stderr); err != nil {
			return err
		}
	}
	// The load's gRPC compression and the sink's decompression.
	codec.RegisterCompressors()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.RunAnchor(ctx, cfg, stderr)
	if res != nil {
		fmt.Fprintln(stdout)
		bench.WriteAnchor(stdout, res)
	}
	return err
}

// pinAnchor chooses the proxies' CPU and pins this process (load, sink, relay control) to the
// others. With a single CPU there is nothing to separate: the run goes on unpinned, and says so.
func pinAnchor(cfg *bench.AnchorConfig, proxyCPU int, stderr io.Writer) error {
	cpus, err := bench.AllowedCPUs()
	if err != nil {
		return err
	}
	if len(cpus) < 2 {
		fmt.Fprintf(stderr, "anchor: only CPU %v is available: the proxies share it with the load, unpinned\n", cpus)
		return nil
	}
	if proxyCPU < 0 {
		proxyCPU = cpus[len(cpus)-1]
	}
	i := slices.Index(cpus, proxyCPU)
	if i < 0 {
		return fmt.Errorf("anchor: -proxy-cpu %d is not among this process's CPUs %v", proxyCPU, cpus)
	}
	rest := slices.Delete(slices.Clone(cpus), i, i+1)
	if err := bench.PinSelf(rest); err != nil {
		return err
	}
	runtime.GOMAXPROCS(len(rest))
	cfg.ProxyCPUs = []int{proxyCPU}
	return nil
}
