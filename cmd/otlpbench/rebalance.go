package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/bench"
)

func cmdRebalance(args []string) error {
	fs := flag.NewFlagSet("rebalance", flag.ContinueOnError)
	gate := fs.String("gate", "./bin/otlpgate", "otlpgate binary, run as the edge")
	lb := fs.String("balancer", "nginx", "nginx or haproxy, run with the configuration in -deploy")
	deploy := fs.String("deploy", "deploy", "the deploy/ directory")
	gateways := fs.Int("gateways", 2, "gateways behind the balancer at the start")
	addAt := fs.Duration("add-at", 20*time.Second, "when one more gateway joins by a reload (0: never)")
	dur := fs.Duration("duration", 45*time.Second, "length of the load")
	reb := fs.Duration("rebalance", 5*time.Second, "the edge's rebalance-timeout (0: no re-balancing)")
	streams := fs.Int("streams", 4, "the edge destination's streams")
	rate := fs.Float64("rate", 200, "batches per second")
	shape := shapeFlag(fs)
	sample := fs.Duration("sample", time.Second, "width of one point of the chart")
	out := fs.String("out", "profiles/rebalance", "output path without extension: .json, .png and .svg are written")
	dir := fs.String("logs", os.TempDir(), "directory for the children's logs and the balancer's files")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sh, err := parseShape(*shape)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.RunRebalance(ctx, bench.RebalanceConfig{Gate: *gate, Balancer: *lb, DeployDir: *deploy,
		Gateways: *gateways, AddAt: *addAt, Duration: *dur, Rebalance: *reb, Streams: *streams, Rate: *rate,
		Shape: sh, Sample: *sample, Dir: *dir}, os.Stderr)
	if err != nil {
		return err
	}
	if err := bench.WriteRebalance(*out+".json", res); err != nil {
		return err
	}
	if err := bench.ChartRebalance(res, *out+".png", *out+".svg"); err != nil {
		return err
	}
	fmt.Printf("%d spans acknowledged by the edge, %d received by the gateways; chart in %s.png\n", res.AckedSpans, res.ReceivedSpans, *out)
	return nil
}
