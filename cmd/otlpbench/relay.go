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

func cmdRelay(args []string) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:4327", "address to accept connections on")
	target := fs.String("target", "127.0.0.1:4319", "address each connection is relayed to")
	buffer := fs.Int("buffer", 0, "copy through a buffer of this many bytes per direction instead of splice(2) (0: splice)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := bench.StartRelay(*listen, *target, *buffer)
	if err != nil {
		return err
	}
	// The bound port, for a parent that passed 127.0.0.1:0 (bench.Proc.Listening).
	fmt.Fprint(os.Stderr, listenlog.Line(listenlog.Relay, r.Addr()))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	r.Close()
	return nil
}
