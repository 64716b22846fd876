package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/bench"
)

func cmdSweep(args []string) error { return sweepCommand(args, os.Stdout, os.Stderr) }

// sweepCommand runs `otlpbench sweep`: the tables go to stdout, progress and notes to stderr.
func sweepCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gate := fs.String("gate", "./bin/otlpgate", "otlpgate binary")
	gateArgs := fs.String("gate-args", "", "extra otlpgate flags (space-separated)")
	peer := fs.String("peer", "./peer/otelcol/otelcol-peer", "the Collector built by make peer-otelcol; skipped with a message when the file does not exist, \"\" to leave it out")
	peerConfigs := fs.String("peer-configs", "",
		"the Collector's configurations measured, NAME=FILE comma-separated (default: the batch processor and sending queue, and receiver -> exporter, "+
			"otelcol-batch=bench/otelcol/config-batch.yaml,otelcol=bench/otelcol/config.yaml; with -out http otelcol-batch=bench/otelcol/config-batch-http.yaml,otelcol=bench/otelcol/config-http.yaml)")
	out := fs.String("out", "grpc", "how otlpgate sends to the sink: grpc (OTLP/gRPC unary v1) or http (OTLP/HTTP protobuf, protocol=http; the Collector's default configurations then export over OTLP/HTTP too)")
	shapes := fs.String("shapes", "small,semconv", "batch shapes: small (100 spans), large (500), semconv (1000 semantic-convention server spans)")
	intakes := fs.String("intakes", "grpc,http", "intakes: grpc (OTLP/gRPC unary v1), http (OTLP/HTTP protobuf)")
	rates := fs.String("rates", "1k,5k,20k,100k,closed", "spans per second, each an open loop; closed is a closed loop of -max-inflight")
	duration := fs.Duration("duration", 10*time.Second, "measured sending per cell")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured sending per cell before it")
	inflight := fs.Int("max-inflight", 8, "unanswered requests before the open loop waits (and counts the send late)")
	idle := fs.Duration("idle", 60*time.Second, "how long each proxy is measured with no traffic (0: not)")
	chart := fs.String("chart", "", "path prefix of the charts (PREFIX-SHAPE.png and .svg), \"\" for none")
	dir := fs.String("logs", os.TempDir(), "directory for the children's logs")
	floors := fs.String("floors", bench.AnchorRelayCopy, "TCP relays measured on the same load as the floor, comma-separated: "+
		bench.AnchorRelayCopy+" (reads each byte into a buffer and writes it out), "+bench.AnchorRelay+" (splice(2)); \"\" for none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := bench.SweepConfig{Gate: *gate, GateArgs: strings.Fields(*gateArgs), Intakes: strings.Split(*intakes, ","),
		Duration: *duration, Warmup: *warmup, MaxInFlight: *inflight, Idle: *idle, Dir: *dir, Out: *out}
	if *out != "grpc" && *out != "http" {
		return fmt.Errorf("sweep: unknown -out %q (want grpc or http)", *out)
	}
	if *peerConfigs == "" {
		*peerConfigs = "otelcol-batch=bench/otelcol/config-batch.yaml,otelcol=bench/otelcol/config.yaml"
		if *out == "http" {
			*peerConfigs = "otelcol-batch=bench/otelcol/config-batch-http.yaml,otelcol=bench/otelcol/config-http.yaml"
		}
	}
	for _, in := range cfg.Intakes {
		if in != "grpc" && in != "http" {
			return fmt.Errorf("sweep: unknown intake %q (want grpc or http)", in)
		}
	}
	for name := range strings.SplitSeq(*shapes, ",") {
		s, err := parseShape(name)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		cfg.Shapes = append(cfg.Shapes, bench.SweepShape{Name: name, Shape: s})
	}
	if *floors != "" {
		for f := range strings.SplitSeq(*floors, ",") {
			if f != bench.AnchorRelay && f != bench.AnchorRelayCopy {
				return fmt.Errorf("sweep: unknown floor %q (want %s or %s)", f, bench.AnchorRelayCopy, bench.AnchorRelay)
			}
			cfg.Floors = append(cfg.Floors, f)
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.Bench = self
	}
	var err error
	if cfg.Rates, err = bench.ParseSweepRates(*rates); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if *duration <= 0 || *inflight <= 0 || *idle < 0 {
		return errors.New("sweep: -duration and -max-inflight must be positive, -idle not negative")
	}
	if _, err := os.Stat(*gate); err != nil {
		return fmt.Errorf("sweep: otlpgate binary: %w (make build)", err)
	}
	if *peer != "" {
		if _, err := os.Stat(*peer); err != nil {
			fmt.Fprintf(stderr, "sweep: no Collector columns: %s is not built (make peer-otelcol builds it)\n", *peer)
		} else {
			for pc := range strings.SplitSeq(*peerConfigs, ",") {
				name, file, ok := strings.Cut(pc, "=")
				if !ok || name == "" || file == "" {
					return fmt.Errorf("sweep: bad -peer-configs entry %q (want NAME=FILE)", pc)
				}
				cfg.Peers = append(cfg.Peers, bench.SweepPeer{Name: name, Bin: *peer, Args: []string{"--config=" + file}})
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.RunSweep(ctx, cfg, stderr)
	if res == nil {
		return err
	}
	fmt.Fprintln(stdout)
	bench.WriteSweep(stdout, res)
	if *chart != "" {
		for _, sh := range cfg.Shapes {
			if cerr := bench.SweepChart(res, sh.Name, *chart+"-"+sh.Name+".png", *chart+"-"+sh.Name+".svg"); cerr != nil {
				fmt.Fprintf(stderr, "sweep: %v\n", cerr)
			}
		}
	}
	return err
}
