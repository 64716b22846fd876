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

func cmdProxy(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	gate := fs.String("gate", "./bin/otlpgate", "otlpgate binary")
	gateArgs := fs.String("gate-args", "-batch.max-age=5ms", "extra otlpgate flags (space-separated)")
	peer := fs.String("peer", "", "another proxy to run the same load through, e.g. ./peer/otelcol/otelcol-peer")
	peerArgs := fs.String("peer-args", "", "the peer's arguments (space-separated); it gets PEER_LISTEN (gRPC), PEER_HTTP_LISTEN (OTLP/HTTP) and PEER_TARGET")
	intake := fs.String("intake", "grpc", "how the load reaches otlpgate and the peer: grpc (unary v1), http-proto or http-json (OTLP/HTTP); direct and the floor are always gRPC")
	shape := shapeFlag(fs)
	inflight := fs.Int("inflight", 8, "requests in flight in the closed-loop phase")
	batches := fs.Int("batches", 0, "closed-loop batches per target (default 20000 small, 2000 large, 1000 semconv)")
	rate := fs.Float64("rate", 0, "batches per second of the latency phase (default 200 small, 20 large and semconv)")
	rateN := fs.Int("rate-batches", 0, "batches of the latency phase (default 10 s worth)")
	dir := fs.String("logs", os.TempDir(), "directory for the children's logs")
	spoolMode := fs.String("spool", "", "run otlpgate with a spool in a temporary directory: always, interval or none (empty: no spool); fsyncs per second are read from its otlpgate_spool_fsyncs_total")
	traces := fs.Int("traces", 1, "traces per batch, their spans interleaved (1: every batch is one trace, so a balanced destination passes it whole)")
	fleet := fs.Int("fleet", 0, "also run otlpgate with a balanced destination (resolver=static, balance=trace_id) over this many backends, all listeners of the sink (0: not)")
	profRate := fs.Int("alloc-profile-rate", 0, "run otlpgate and the floor with GODEBUG=memprofilerate=N (0: the runtime's default, one sample per 512 KiB); 1 records every allocation, so the own/other columns are exact counts, at a CPU cost")
	header := fs.String("header", "", "a header on every load request, name=v1,v2,...: worker w sends value w mod n, e.g. x-scope-orgid=acme,beta,gamma for otlpgate's -intake.headers (add it with -gate-args); empty: none")
	floor := fs.Bool("floor", true, "also measure a bare grpc-go forwarder (otlpbench forward), the floor of CPU and allocations")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sh, err := parseShape(*shape)
	if err != nil {
		return err
	}
	sh.Traces = *traces
	hdr, hdrValues, err := parseHeader(*header)
	if err != nil {
		return err
	}
	switch *intake {
	case "grpc", "http-proto", "http-json":
	default:
		return fmt.Errorf("proxy: unknown -intake %q (want grpc, http-proto or http-json)", *intake)
	}
	if *batches == 0 {
		*batches = map[string]int{"small": 20000, "large": 2000, "semconv": 1000}[*shape]
	}
	if *rate == 0 {
		*rate = map[string]float64{"small": 200, "large": 20, "semconv": 20}[*shape]
	}
	if *rateN == 0 {
		*rateN = int(*rate * 10)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if !*floor {
		self = ""
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	gateFlags := strings.Fields(*gateArgs)
	var fsyncs *fsyncWatch
	if *spoolMode != "" {
		dir, err := os.MkdirTemp("", "otlpbench-spool-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		// One admin port for every otlpgate run of RunProxy, so that the watcher scrapes one
		// address across them: it is chosen here (bench.FreeAddr never repeats a port within
		// this process), and another process could take it before otlpgate binds it, which
		// stops the run with otlpgate's bind error.
		admin, err := bench.FreeAddr()
		if err != nil {
			return err
		}
		gateFlags = append(gateFlags, "-spool.dir="+dir, "-spool.sync="+*spoolMode, "-admin.listen="+admin)
		fsyncs = watchFsyncs(ctx, admin)
	}
	res, err := bench.RunProxy(ctx, bench.ProxyConfig{
		Bench: self, Gate: *gate, GateArgs: gateFlags, Peer: *peer, PeerArgs: strings.Fields(*peerArgs),
		Intake: *intake, Shape: sh, InFlight: *inflight, Batches: *batches, Rate: *rate, RateN: *rateN, Dir: *dir,
		Fleet: *fleet, AllocProfileRate: *profRate, Header: hdr, HeaderValues: hdrValues,
	}, os.Stderr)
	fmt.Printf("\nload -> proxy -> sink, %s intake, %s batches (%d spans x %d attributes, %d traces), %d in flight, latency at %.0f batches/s\n",
		*intake, *shape, sh.Spans, sh.Attrs, max(sh.Traces, 1), *inflight, *rate)
	bench.WriteProxy(os.Stdout, res, *rateN)
	if fsyncs != nil {
		n, perSec := fsyncs.result()
		fmt.Printf("spool sync=%s: %.0f fsyncs, %.1f per second while appending\n", *spoolMode, n, perSec)
	}
	return err
}
