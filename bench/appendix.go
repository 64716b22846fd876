package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/gateway"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	grpcserver "github.com/otlpgate/otlpgate/server/grpc"
)

// Mode is one row family of the appendix: how the client sends and how the server re-balances.
type Mode struct {
	Name  string
	Async bool // more than one request in flight
	// setup adjusts the client and server configurations of the run.
	setup func(c *client.Config, s *grpcserver.Config)
}

// Rebalance is the re-balancing period of the LBTimed and LBSrv modes. The appendix runs are
// seconds long; a period this short makes the cost of re-opening streams show in them.
const Rebalance = time.Second

// asyncWindow is the requests one stream may have unacknowledged in the Async modes: enough to
// keep a 200 ms path busy at the throughput of a loopback run.
const asyncWindow = 1024

// Modes are the appendix's modes, in its order.
var Modes = []Mode{
	{"GRPC/Unary", false, func(c *client.Config, _ *grpcserver.Config) {
		c.Mode, c.Concurrency = client.ModeUnary, 1
	}},
	{"GRPC/Unary/Async", true, func(c *client.Config, _ *grpcserver.Config) {
		c.Mode, c.Concurrency = client.ModeUnary, 10
	}},
	{"GRPC/Stream/NoLB", false, func(c *client.Config, _ *grpcserver.Config) {
		c.Streams, c.Window, c.RebalanceTimeout, c.RebalanceRequests = 1, 1, 0, 0
	}},
	{"GRPC/Stream/LBAlways/Sync", false, func(c *client.Config, _ *grpcserver.Config) {
		c.Streams, c.Window, c.RebalanceTimeout, c.RebalanceRequests = 1, 1, 0, 1
	}},
	{"GRPC/Stream/LBTimed/Sync", false, func(c *client.Config, _ *grpcserver.Config) {
		c.Streams, c.Window, c.RebalanceTimeout, c.RebalanceRequests = 1, 1, Rebalance, 0
	}},
	{"GRPC/Stream/LBTimed/Async/1", true, func(c *client.Config, _ *grpcserver.Config) {
		c.Streams, c.Window, c.RebalanceTimeout, c.RebalanceRequests = 1, asyncWindow, Rebalance, 0
	}},
	{"GRPC/Stream/LBTimed/Async/10", true, func(c *client.Config, _ *grpcserver.Config) {
		c.Streams, c.Window, c.RebalanceTimeout, c.RebalanceRequests = 10, asyncWindow/10, Rebalance, 0
	}},
	{"GRPC/Stream/LBSrv/Async", true, func(c *client.Config, s *grpcserver.Config) {
		c.Streams, c.Window, c.RebalanceTimeout, c.RebalanceRequests = 1, asyncWindow, 0, 0
		s.StreamMaxAge = Rebalance
	}},
}

// Latencies are the appendix's round-trip times.
var Latencies = []time.Duration{20 * time.Microsecond, 2 * time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond}

// Batches is the appendix's batch count for a run, multiplied by scale (at least 10).
func Batches(shape string, rtt time.Duration, async bool, scale float64) int {
	n := 8000
	if shape == "large" {
		n = 800
	}
	switch {
	case rtt >= 200*time.Millisecond && !async:
		n = 40
	case rtt >= 20*time.Millisecond && rtt < 200*time.Millisecond, rtt >= 200*time.Millisecond:
		n = 400
	}
	return max(10, int(float64(n)*scale))
}

// AppendixConfig is one appendix run.
type AppendixConfig struct {
	Mode    Mode
	RTT     time.Duration
	Shape   string
	Batches int
	// DelayLine starts a delay line to target with the given round trip and returns its address
	// and a stop function; otlpbench runs it in a child process.
	DelayLine func(target string, rtt time.Duration) (addr string, stop func(), err error)
	// Progress, when set, is called with the batches acknowledged so far.
	Progress func(done int)
	// Window sizes for both ends (the -http2.* flags of otlpbench).
	StreamWindow, ConnWindow int32
}

// countDest counts what reaches the server's pipeline and finishes it at once.
type countDest struct{ batches, items atomic.Int64 }

func (d *countDest) Name() string { return "count" }

func (d *countDest) Enqueue(b *pipeline.Batch) error {
	d.batches.Add(1)
	d.items.Add(int64(b.Items))
	b.Done(true)
	return nil
}

// gatewayConfig is an otlpgate with every listener off.
func gatewayConfig() gateway.Config {
	c := gateway.DefaultConfig()
	c.GRPC.Listen, c.HTTP.Listen, c.Kafka.Listen, c.UDS.Listen, c.Admin.Listen = "", "", "", "", ""
	return c
}

// RunAppendix runs one row: it generates cfg.Batches batches (inside the timed loop, as the
// reference does), sends them through otlpgate's client to otlpgate's server over the delay line,
// and measures this process's CPU time and the wall time until the last acknowledgement.
func RunAppendix(ctx context.Context, cfg AppendixConfig) (Row, error) {
	shape := otlpgen.Small
	if cfg.Shape == "large" {
		shape = otlpgen.Large
	}
	log := slog.New(slog.DiscardHandler)

	// Server side: an otlpgate whose gRPC intake feeds a pipeline that only counts.
	counted := &countDest{}
	srvCfg := gatewayConfig()
	srvCfg.Pipeline.BatchMaxAge = time.Millisecond
	srvCfg.Pipeline.QueueMaxBytes = 1 << 30
	srvCfg.Extra = []pipeline.Destination{counted}
	scfg := &srvCfg.GRPC
	scfg.Listen = "127.0.0.1:0"
	scfg.MaxRecvMsgSize = 64 << 20
	scfg.InitialWindowSize, scfg.InitialConnWindowSize = cfg.StreamWindow, cfg.ConnWindow
	// The appendix measures the protocol, not the intake limiter: each call reserves the
	// largest message (64MiB) while it is received, and none may wait for another's.
	srvCfg.Intake.MaxBytes = 64 * int64(scfg.MaxRecvMsgSize)
	srvCfg.Intake.MaxConnBytes = srvCfg.Intake.MaxBytes
	ccfg := client.DefaultConfig()
	ccfg.Name = "appendix"
	ccfg.Protocol, ccfg.Mode = client.ProtocolOTEP, client.ModeStream // the appendix measures OTEP; a mode's setup may make it unary
	ccfg.InitialWindowSize, ccfg.InitialConnWindowSize = cfg.StreamWindow, cfg.ConnWindow
	ccfg.MaxSendMsgSize = 64 << 20
	ccfg.QueueBytes = 1 << 30
	cfg.Mode.setup(&ccfg, scfg)
	srv, err := gateway.New(srvCfg, log)
	if err != nil {
		return Row{}, err
	}
	if err := srv.Start(ctx); err != nil {
		return Row{}, err
	}
	defer srv.Shutdown(context.Background())

	addr, stopDelay, err := cfg.DelayLine(srv.GRPCAddr().String(), cfg.RTT)
	if err != nil {
		return Row{}, err
	}
	defer stopDelay()

	// Client side: an otlpgate without intakes whose pipeline seals every request on its own,
	// so that a batch of the appendix is one request on the wire.
	ccfg.Endpoint = addr
	cliCfg := gatewayConfig()
	cliCfg.Pipeline.BatchMaxItems = shape.Spans
	cliCfg.Pipeline.BatchMaxBytes = 16 << 20
	cliCfg.Pipeline.QueueMaxBytes = 256 << 20
	cliCfg.Destinations = []client.Config{ccfg}
	cliCfg.ShutdownTimeout = 10 * time.Second
	cli, err := gateway.New(cliCfg, log)
	if err != nil {
		return Row{}, err
	}
	if err := cli.Start(ctx); err != nil {
		return Row{}, err
	}
	defer cli.Shutdown(context.Background())
	cliPipe := cli.Pipeline()

	gen := otlpgen.New(1)
	var body []byte
	startCPU, start := SelfUsage(), time.Now()
	for i := 0; i < cfg.Batches; i++ {
		req := gen.Spans(shape)
		if n := req.SizeVT(); cap(body) < n {
			body = make([]byte, n)
		} else {
			body = body[:n]
		}
		// Admit copies the request into its batch, so one buffer serves every iteration.
		if _, err := req.MarshalToSizedBufferVT(body); err != nil {
			return Row{}, err
		}
		for {
			_, err = cliPipe.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: shape.Spans})
			if !errors.Is(err, pipeline.ErrFull) {
				break
			}
			time.Sleep(100 * time.Microsecond) // the client is behind: the queue is the window
		}
		if err != nil {
			return Row{}, err
		}
		if cfg.Progress != nil && i%64 == 0 {
			cfg.Progress(int(counted.batches.Load()))
		}
	}
	// Done when every batch left the client's pipeline: acknowledged (or given up) upstream.
	for cliPipe.QueuedBytes() > 0 {
		if ctx.Err() != nil {
			return Row{}, ctx.Err()
		}
		time.Sleep(200 * time.Microsecond)
	}
	wall, cpu := time.Since(start), SelfUsage().Sub(startCPU)
	if cfg.Progress != nil {
		cfg.Progress(cfg.Batches)
	}
	cli.Shutdown(ctx)
	srv.Pipeline().Flush()
	received := int(counted.items.Load()) / shape.Spans
	return Row{
		Mode: cfg.Mode.Name, RTT: cfg.RTT, Shape: cfg.Shape,
		Batches: cfg.Batches, Spans: cfg.Batches * shape.Spans,
		CPU: cpu.Total(), Wall: wall, Errors: cfg.Batches - received,
	}, nil
}

// ChildDelayLine runs `exe delay` in a child process and returns its address. The child exits
// when stop closes its standard input.
func ChildDelayLine(exe string) func(target string, rtt time.Duration) (string, func(), error) {
	return func(target string, rtt time.Duration) (string, func(), error) {
		cmd := exec.Command(exe, "delay", "-target", target, "-rtt", rtt.String())
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return "", nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return "", nil, err
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return "", nil, err
		}
		stop := func() {
			stdin.Close()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
		if err != nil || !ok {
			stop()
			return "", nil, fmt.Errorf("bench: delay line did not start: %q %v", line, err)
		}
		go io.Copy(io.Discard, stdout)
		return addr, stop, nil
	}
}
