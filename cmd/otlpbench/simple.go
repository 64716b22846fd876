package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/bench"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

func shapeFlag(fs *flag.FlagSet) *string {
	return fs.String("shape", "small", "batch shape: small (100 spans x 4 attributes), large (500 x 10) or semconv (1000 HTTP server spans of about 820 bytes)")
}

func parseShape(s string) (otlpgen.Shape, error) {
	switch s {
	case "small":
		return otlpgen.Small, nil
	case "large":
		return otlpgen.Large, nil
	case "semconv":
		return otlpgen.Semconv, nil
	}
	return otlpgen.Shape{}, fmt.Errorf("unknown shape %q (want small, large or semconv)", s)
}

func cmdLoad(args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	target := fs.String("target", "127.0.0.1:4317", "receiver address")
	proto := fs.String("protocol", "otep", "v1 (TraceService unary calls), otep (one pipelined StreamExporter stream), http-proto or http-json (OTLP/HTTP POST /v1/traces)")
	shape := shapeFlag(fs)
	batches := fs.Int("batches", 10000, "batches to send")
	inflight := fs.Int("inflight", 8, "requests awaiting an answer at once (v1: concurrent calls; otep: stream window)")
	rate := fs.Float64("rate", 0, "batches per second; 0 sends as fast as answers allow (closed loop)")
	seed := fs.Uint64("seed", 1, "seed of the generated attributes")
	header := fs.String("header", "", "a header on every request, name=v1,v2,...: worker w sends value w mod n (tenants for otlpgate's -intake.headers); empty: none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sh, err := parseShape(*shape)
	if err != nil {
		return err
	}
	hdr, hdrValues, err := parseHeader(*header)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	before := bench.SelfUsage()
	res, err := bench.RunLoad(ctx, bench.LoadConfig{Target: *target, Protocol: *proto, Shape: sh,
		Batches: *batches, InFlight: *inflight, Rate: *rate, Seed: *seed, Header: hdr, HeaderValues: hdrValues})
	cpu := bench.SelfUsage().Sub(before)
	fmt.Printf("sent %d, acknowledged %d, failed %d batches (%d spans) in %v: %.0f batches/s, load CPU %v\n",
		res.Sent, res.Acked, res.Failed, res.Acked*sh.Spans, res.Wall.Round(time.Millisecond),
		float64(res.Acked)/res.Wall.Seconds(), cpu.Total().Round(time.Millisecond))
	return err
}

func cmdSink(args []string) error {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:4319", "address to receive on")
	every := fs.Duration("report", 5*time.Second, "print counts this often")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := bench.StartSink(*listen)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Printf("sink listening on %s\n", s.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(*every)
	defer t.Stop()
	report := func() {
		b, sp, bad := s.Counts()
		lat := s.Latencies()
		fmt.Printf("batches %d, spans %d, unreadable %d, latency p50 %v p99 %v p999 %v\n", b, sp, bad,
			bench.Percentile(lat, 0.5), bench.Percentile(lat, 0.99), bench.Percentile(lat, 0.999))
	}
	for {
		select {
		case <-ctx.Done():
			report()
			return nil
		case <-t.C:
			report()
		}
	}
}

// cmdDelay runs a delay line until its standard input closes or it is signalled; it prints
// "listening ADDR" first, which is how otlpbench appendix learns the address of its child.
func cmdDelay(args []string) error {
	fs := flag.NewFlagSet("delay", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address clients connect to")
	target := fs.String("target", "", "address bytes are forwarded to")
	rtt := fs.Duration("rtt", 2*time.Millisecond, "round-trip time to add; each direction is delayed by half")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" {
		return fmt.Errorf("delay: -target is required")
	}
	d, err := bench.NewDelayLine(*listen, *target, *rtt/2)
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Printf("listening %s\n", d.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		bufio.NewReader(os.Stdin).ReadString(0) // returns when the parent closes our stdin
		stop()
	}()
	<-ctx.Done()
	return nil
}
