// Command otlpgate is the telemetry edge proxy. See the README for its flags.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
)

func main() {
	fs := flag.NewFlagSet("otlpgate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: otlpgate [flags]\n\nIntakes: OTLP/gRPC (v1 and OTEP unary/stream), OpenCensus daemon (UDS), Kafka KIP-714.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	// GOMAXPROCS is left to the runtime, which follows the cgroup CPU limit and keeps it current.
	slog.Info("otlpgate starting", "gomaxprocs", runtime.GOMAXPROCS(0), "intakes", "grpc,uds,kafka (wired in later releases)")
}
