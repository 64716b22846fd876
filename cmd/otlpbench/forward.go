package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/otlpgate/otlpgate/bench"
	"github.com/otlpgate/otlpgate/internal/listenlog"
)

// cmdForward runs the bare grpc-go forwarder that `otlpbench proxy` measures as its floor.
func cmdForward(args []string) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:4317", "address to receive OTLP v1 Export calls on")
	target := fs.String("target", "127.0.0.1:4319", "where to forward each call")
	admin := fs.String("admin", "", "address of /metrics and /debug/pprof/ (empty: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := bench.StartForwarder(*listen, *target, *admin)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Printf("forwarding %s -> %s\n", f.Addr(), *target)
	// The bound ports, for a parent that passed 127.0.0.1:0 (bench.Proc.Listening).
	fmt.Fprint(os.Stderr, listenlog.Line(listenlog.Forward, f.Addr()))
	if a := f.AdminAddr(); a != "" {
		fmt.Fprint(os.Stderr, listenlog.Line(listenlog.Admin, a))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
