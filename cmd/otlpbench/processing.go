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

// defaultProcessing is issue 23's processing: two resource attributes set, tenants on.
const defaultProcessing = "-resource.set k8s.node.name=node-1 -resource.set deployment.environment=prod -intake.headers x-scope-orgid"

func cmdProcessing(args []string) error {
	fs := flag.NewFlagSet("processing", flag.ContinueOnError)
	gate := fs.String("gate", "./bin/otlpgate", "otlpgate binary")
	plain := fs.String("gate-args", "-batch.max-age=5ms", "otlpgate's flags in both runs (space-separated)")
	proc := fs.String("proc-args", defaultProcessing, "otlpgate's further flags in the processed runs (space-separated)")
	intakes := fs.String("intakes", "grpc,http-proto,http-json", "intakes, comma-separated: grpc (unary v1), http-proto, http-json")
	shapes := fs.String("shapes", "small,large", "batch shapes, comma-separated: small, large, semconv")
	inflight := fs.Int("inflight", 8, "requests in flight")
	rounds := fs.Int("rounds", 5, "runs of each row each way, alternating plain and processed")
	batches := fs.Int("batches", 0, "batches of a measured run (default 20000 small, 3000 large, 1000 semconv)")
	header := fs.String("header", "x-scope-orgid=acme,beta,gamma", "a header on every load request of both runs, name=v1,v2,...: worker w sends value w mod n (the tenants of -intake.headers); empty: none")
	dir := fs.String("logs", os.TempDir(), "directory for the children's logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := bench.ProcessingConfig{Gate: *gate, PlainArgs: strings.Fields(*plain),
		ProcArgs: append(strings.Fields(*plain), strings.Fields(*proc)...), Intakes: strings.Split(*intakes, ","),
		InFlight: *inflight, Rounds: *rounds, Dir: *dir}
	var err error
	if cfg.Header, cfg.HeaderValues, err = parseHeader(*header); err != nil {
		return err
	}
	for _, name := range strings.Split(*shapes, ",") {
		sh, err := parseShape(name)
		if err != nil {
			return err
		}
		n := *batches
		if n == 0 {
			n = map[string]int{"small": 20000, "large": 3000, "semconv": 1000}[name]
		}
		cfg.Shapes = append(cfg.Shapes, bench.ProcessingShape{Name: name, Shape: sh, Batches: n})
	}
	for _, in := range cfg.Intakes {
		switch in {
		case "grpc", "http-proto", "http-json":
		default:
			return fmt.Errorf("processing: unknown intake %q (want grpc, http-proto or http-json)", in)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := bench.RunProcessing(ctx, cfg, os.Stderr)
	fmt.Printf("\notlpgate's CPU per forwarded span, plain (%s) and processed (+ %s), %d in flight, medians of %d alternated rounds; header %s\n",
		*plain, *proc, *inflight, *rounds, *header)
	bench.WriteProcessing(os.Stdout, rows)
	return err
}

// parseHeader reads "name=v1,v2,..." (empty: no header).
func parseHeader(s string) (name string, values []string, err error) {
	if s == "" {
		return "", nil, nil
	}
	name, vs, ok := strings.Cut(s, "=")
	if !ok || name == "" || vs == "" {
		return "", nil, fmt.Errorf("-header %q: want name=value[,value...]", s)
	}
	return name, strings.Split(vs, ","), nil
}
