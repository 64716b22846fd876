package main

import (
	"fmt"
	"os"
)

var commands = map[string]func(args []string) error{
	"load":       cmdLoad,
	"sink":       cmdSink,
	"delay":      cmdDelay,
	"proxy":      cmdProxy,
	"processing": cmdProcessing,
	"appendix":   cmdAppendix,
	"profile":    cmdProfile,
	"soak":       cmdSoak,
	"rebalance":  cmdRebalance,
	"forward":    cmdForward,
	"batching":   cmdBatching,
	"anchor":     cmdAnchor,
	"relay":      cmdRelay,
	"sweep":      cmdSweep,
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: otlpbench COMMAND [flags]

commands:
  appendix   the OTLP specification's Appendix B on otlpgate's client and server
  proxy      load -> otlpgate -> sink, against a direct run and optionally a peer proxy
  processing otlpgate's CPU per span with processing steps (-resource.set, tenants) against without
  anchor     CPU per span of each proxy pinned to one core, against a TCP relay (the floor), semconv batches
  sweep      CPU per span, latency and peak RSS of otlpgate and the Collector from 1k spans/s to a closed loop, and idle
  batching   otlpgate's batch policies compared at fixed gRPC and UDS rates (CPU, out/in, p50)
  load       an OTLP trace load generator (v1 unary or OTEP stream)
  sink       a counting OTLP trace receiver
  delay      a TCP delay line on loopback
  forward    a bare grpc-go forwarder (the floor of otlpbench proxy)
  relay      a TCP relay that copies bytes without looking at them (the floor of otlpbench anchor)
  rebalance  the share of requests per gateway over time through nginx or HAProxy, a gateway added mid-run`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		usage()
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "otlpbench:", err)
		os.Exit(1)
	}
}
