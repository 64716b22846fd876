package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/bench"
	"github.com/otlpgate/otlpgate/internal/bytesize"
)

func cmdAppendix(args []string) error {
	fs := flag.NewFlagSet("appendix", flag.ContinueOnError)
	scale := fs.Float64("scale", 1, "multiply the appendix's batch counts (e.g. 0.05 for a quick run)")
	shapes := fs.String("shapes", "small,large", "batch shapes to run")
	modes := fs.String("modes", "", "comma-separated mode names to run (default: all)")
	rtts := fs.String("rtts", "20us,2ms,20ms,200ms", "round-trip latencies to inject")
	jsonPath := fs.String("json", "", "write the results as JSON to this file")
	chart := fs.String("chart", "", "write charts to PREFIX-small.{png,svg} and PREFIX-large.{png,svg}")
	streamWin := fs.String("http2.stream-window", "64MiB", "HTTP/2 stream window of client and server")
	connWin := fs.String("http2.conn-window", "256MiB", "HTTP/2 connection window of client and server")
	memLimit := fs.String("memlimit", "4GiB", "soft memory limit of this process (GOMEMLIMIT); no ballast")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sw, err := bytesize.Parse(*streamWin, 1<<31-1)
	if err != nil {
		return err
	}
	cw, err := bytesize.Parse(*connWin, 1<<31-1)
	if err != nil {
		return err
	}
	ml, err := bytesize.Parse(*memLimit, 1<<62)
	if err != nil {
		return err
	}
	debug.SetMemoryLimit(ml)
	var lats []time.Duration
	for _, s := range strings.Split(*rtts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("bad -rtts element %q: %w", s, err)
		}
		lats = append(lats, d)
	}
	want := map[string]bool{}
	for _, m := range strings.Split(*modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			want[m] = true
		}
	}
	var run []bench.Mode
	for _, m := range bench.Modes {
		if len(want) == 0 || want[m.Name] {
			run = append(run, m)
		}
	}
	if len(run) == 0 {
		return fmt.Errorf("no mode matches -modes %q", *modes)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	total := len(run) * len(lats) * len(strings.Split(*shapes, ","))
	prog := newProgress(os.Stderr)
	var rows []bench.Row
	k := 0
	for _, shape := range strings.Split(*shapes, ",") {
		shape = strings.TrimSpace(shape)
		if shape != "small" && shape != "large" {
			return fmt.Errorf("unknown shape %q", shape)
		}
		for _, rtt := range lats {
			for _, m := range run {
				k++
				n := bench.Batches(shape, rtt, m.Async, *scale)
				label := fmt.Sprintf("[%d/%d] %s %s %s", k, total, m.Name, shape, bench.FormatRTT(rtt))
				runtime.GC()
				row, err := bench.RunAppendix(ctx, bench.AppendixConfig{
					Mode: m, RTT: rtt, Shape: shape, Batches: n,
					DelayLine:    bench.ChildDelayLine(exe),
					StreamWindow: int32(sw), ConnWindow: int32(cw),
					Progress: func(done int) { prog.batches(label, done, n) },
				})
				prog.finished(label, row, err)
				if err != nil {
					return fmt.Errorf("%s: %w", label, err)
				}
				rows = append(rows, row)
			}
		}
	}
	bench.WriteRows(os.Stdout, rows)
	factors := bench.Factors(rows, "GRPC/Unary")
	bench.WriteFactors(os.Stdout, factors, "GRPC/Unary")
	if *jsonPath != "" {
		host, _ := os.Hostname()
		err := bench.WriteJSON(*jsonPath, bench.Report{
			Started: time.Now(), Command: "otlpbench appendix " + strings.Join(args, " "),
			Machine: fmt.Sprintf("%s, %d CPUs, %s", host, runtime.NumCPU(), runtime.Version()),
			Rows:    rows, Factors: factors,
		})
		if err != nil {
			return err
		}
	}
	if *chart != "" {
		for _, shape := range []string{"small", "large"} {
			if err := bench.Chart(rows, shape, *chart+"-"+shape+".png", *chart+"-"+shape+".svg"); err != nil && strings.Contains(*shapes, shape) {
				return err
			}
		}
	}
	return nil
}
