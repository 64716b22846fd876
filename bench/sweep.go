package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// SweepConfig is an `otlpbench sweep` run: the CPU a proxy spends per span at the rates one
// node's agent sees, not only at saturation. Each cell is an anchor cell (runAnchorCell) with
// the proxy as deployed (unpinned, its own GOMAXPROCS): a fresh process, warmed up, then an
// open loop at one rate (or a closed loop) for Duration, its CPU from the kernel's clock of the
// process divided by the spans the sink received, the client's latencies and the proxy's peak
// RSS. Before the rates, each proxy runs Idle with no traffic at all.
type SweepConfig struct {
	Gate     string   // otlpgate binary
	GateArgs []string // extra otlpgate flags
	// Peers are the Collector in the configurations measured beside otlpgate, "" binaries left
	// out by the caller.
	Peers  []SweepPeer
	Shapes []SweepShape
	// Intakes are "grpc" (OTLP/gRPC unary v1) and "http" (OTLP/HTTP protobuf).
	Intakes []string
	// Out is how otlpgate sends to the sink: "grpc" (OTLP/gRPC unary v1, the default) or
	// "http" (OTLP/HTTP protobuf); a peer's configuration says its own (PEER_TARGET is the
	// sink's gRPC side, PEER_HTTP_TARGET its OTLP/HTTP side).
	Out string
	// Rates are spans per second, in the order measured; 0 is a closed loop of MaxInFlight.
	Rates            []float64
	Duration, Warmup time.Duration // measured and unmeasured sending per cell
	MaxInFlight      int           // unanswered requests before the open loop waits
	// Idle is how long each proxy is measured with no traffic (every otlpgate intake on, the
	// UDS and Kafka ones too); 0 skips it. The proxies idle at the same time.
	Idle time.Duration
	Dir  string // where the children's logs go
	// Floors are TCP relays measured on the same load as the proxies, AnchorRelay (splice)
	// and AnchorRelayCopy (read into a buffer, written out): what moving the bytes through a
	// process costs at each rate, below which no proxy goes. They are not measured idle.
	Floors []string
	Bench  string // otlpbench binary, run as `otlpbench relay` for the floors
}

// SweepPeer is a proxy measured beside otlpgate: a binary that gets PEER_LISTEN,
// PEER_HTTP_LISTEN, PEER_TARGET and PEER_COMPRESSION in its environment (bench/otelcol).
type SweepPeer struct {
	Name string // the target's name in the tables, "otelcol-batch"
	Bin  string
	Args []string
}

// SweepShape is a batch shape with its name in the tables.
type SweepShape struct {
	Name  string
	Shape otlpgen.Shape
}

// SweepCell is one target's measurement at one shape, intake and rate.
type SweepCell struct {
	AnchorCell
	Shape string
	Rate  float64 // spans per second asked, 0 for the closed loop
}

// Delivered is the spans per second the sink received in the measured phase.
func (c SweepCell) Delivered() float64 {
	if c.Wall <= 0 {
		return 0
	}
	return float64(c.Spans) / c.Wall.Seconds()
}

// SweepIdle is a proxy's CPU with no traffic.
type SweepIdle struct {
	Target    string
	CPU, Wall time.Duration
	Wakeups   int64 // voluntary context switches: a thread that slept and was woken
	Threads   int
	RSS       int64 // peak RSS
	Err       string
}

// Share is the idle CPU as a share of one core.
func (i SweepIdle) Share() float64 {
	if i.Wall <= 0 {
		return 0
	}
	return float64(i.CPU) / float64(i.Wall)
}

// SweepResult is a whole run.
type SweepResult struct {
	Config  SweepConfig
	Targets []string // otlpgate first, then the peers, then the floors
	Idle    []SweepIdle
	Cells   []SweepCell
}

// Cell returns the cell of target, shape, intake and rate, or nil.
func (r *SweepResult) Cell(target, shape, intake string, rate float64) *SweepCell {
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Target == target && c.Shape == shape && c.Intake == intake && c.Rate == rate {
			return c
		}
	}
	return nil
}

// ParseSweepRates reads a comma-separated list of spans per second: plain numbers, a k or M
// suffix (5k, 1.5M), and "closed" for the closed loop (0).
func ParseSweepRates(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "closed" {
			out = append(out, 0)
			continue
		}
		mul := 1.0
		switch {
		case strings.HasSuffix(f, "k"):
			f, mul = f[:len(f)-1], 1e3
		case strings.HasSuffix(f, "M"):
			f, mul = f[:len(f)-1], 1e6
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bench: bad rate %q (want spans per second, as 5000, 5k or closed)", f)
		}
		out = append(out, v*mul)
	}
	return out, nil
}

// FormatRate writes spans per second as ParseSweepRates reads them.
func FormatRate(v float64) string {
	switch {
	case v <= 0:
		return "closed"
	case v >= 1e6 && v == float64(int64(v/1e6))*1e6:
		return fmt.Sprintf("%dM", int64(v/1e6))
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3 && v == float64(int64(v/1e3))*1e3:
		return fmt.Sprintf("%dk", int64(v/1e3))
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// batchRate is the requests per second that carry spans per second in batches of shape; 0
// (the closed loop) stays 0.
func batchRate(spans float64, shape otlpgen.Shape) float64 {
	return spans / float64(shape.Spans)
}

// RunSweep measures idle first, then every shape, intake and rate with each target in turn,
// so that the cells compared with one another are measured seconds apart.
func RunSweep(ctx context.Context, cfg SweepConfig, progress io.Writer) (*SweepResult, error) {
	for _, f := range cfg.Floors {
		if f != AnchorRelay && f != AnchorRelayCopy {
			return nil, fmt.Errorf("bench: unknown floor %q (want %s or %s)", f, AnchorRelay, AnchorRelayCopy)
		}
		if cfg.Bench == "" {
			return nil, fmt.Errorf("bench: the %s floor needs the otlpbench binary", f)
		}
	}
	sink, hsink, stop, err := startSinks()
	if err != nil {
		return nil, err
	}
	defer stop()
	res := &SweepResult{Config: cfg, Targets: []string{AnchorGate}}
	for _, p := range cfg.Peers {
		res.Targets = append(res.Targets, p.Name)
	}
	proxies := slices.Clone(res.Targets)
	res.Targets = append(res.Targets, cfg.Floors...)
	if cfg.Idle > 0 {
		res.Idle = runSweepIdle(ctx, cfg, proxies, sink, hsink, progress)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	var scratch AnchorResult
	for _, sh := range cfg.Shapes {
		bodies, _, err := buildBodies(ctx, sh.Shape, 8, "none", sink.Addr())
		if err != nil {
			return res, err
		}
		for _, intake := range cfg.Intakes {
			for _, rate := range cfg.Rates {
				for _, target := range res.Targets {
					acfg := sweepAnchorConfig(cfg, target)
					acfg.Shape, acfg.Rate = sh.Shape, batchRate(rate, sh.Shape)
					acfg.LogPrefix = "sweep-" + sh.Name + "-" + FormatRate(rate)
					m, err := runAnchorCell(ctx, acfg, target, intake, bodies, sink, hsink, &scratch, progress)
					if ctx.Err() != nil {
						return res, ctx.Err()
					}
					c := SweepCell{AnchorCell: m, Shape: sh.Name, Rate: rate}
					if err != nil {
						c.Err = err.Error()
						fmt.Fprintf(progress, "%s %s %s %s: %v\n", target, sh.Name, intake, FormatRate(rate), err)
					} else {
						fmt.Fprintf(progress, "%s %s %s %s: %d spans in %v (%.0f/s), %v CPU, %.3f µs/span, p50 %v, p99 %v, peak RSS %d MiB, %d failed, %d late\n",
							target, sh.Name, intake, FormatRate(rate), m.Spans, m.Wall.Round(time.Millisecond), c.Delivered(), m.CPU.Round(time.Microsecond),
							m.CPUPerSpan(), m.P50.Round(time.Microsecond), m.P99.Round(time.Microsecond), m.PeakRSS>>20, m.Failed, m.Late)
					}
					res.Cells = append(res.Cells, c)
				}
			}
		}
	}
	return res, nil
}

// sweepAnchorConfig is the anchor configuration of target's cells: the proxy unpinned, with
// its own GOMAXPROCS, its logs named sweep-*.
func sweepAnchorConfig(cfg SweepConfig, target string) AnchorConfig {
	acfg := AnchorConfig{Gate: cfg.Gate, GateArgs: cfg.GateArgs, Duration: cfg.Duration, Warmup: cfg.Warmup,
		MaxInFlight: cfg.MaxInFlight, Rounds: 1, Dir: cfg.Dir, OwnProcs: true, LogPrefix: "sweep", Out: cfg.Out, Bench: cfg.Bench}
	for _, p := range cfg.Peers {
		if p.Name == target {
			acfg.Peer, acfg.PeerArgs = p.Bin, p.Args
		}
	}
	return acfg
}

// idleSettle is how long a proxy runs after it listens before its idle CPU is read: what it
// does once at start (its first GC, the first status sample) is not idling.
const idleSettle = 3 * time.Second

// runSweepIdle starts every target at once and reads its CPU over cfg.Idle with no traffic.
// otlpgate runs with every intake on: gRPC, HTTP, the OpenCensus socket and Kafka.
func runSweepIdle(ctx context.Context, cfg SweepConfig, targets []string, sink *Sink, hsink *HTTPSink, progress io.Writer) []SweepIdle {
	out := make([]SweepIdle, len(targets))
	settle := min(idleSettle, cfg.Idle)
	fmt.Fprintf(progress, "idle: %s for %v each, no traffic\n", strings.Join(targets, ", "), cfg.Idle)
	var wg sync.WaitGroup
	for i, target := range targets {
		wg.Go(func() {
			out[i] = SweepIdle{Target: target}
			acfg := sweepAnchorConfig(cfg, target)
			acfg.LogPrefix = "sweep-idle"
			if target == AnchorGate {
				acfg.GateArgs = append(slices.Clone(cfg.GateArgs), "-uds.listen", filepath.Join(cfg.Dir, "sweep-idle-oc.sock"),
					"-kafka.listen", AnyPort)
			}
			m, err := measureIdle(ctx, acfg, target, settle, cfg.Idle, sink, hsink)
			if err != nil {
				m.Err = err.Error()
			}
			out[i] = m
		})
	}
	wg.Wait()
	for _, m := range out {
		if m.Err != "" {
			fmt.Fprintf(progress, "idle %s: %s\n", m.Target, m.Err)
			continue
		}
		fmt.Fprintf(progress, "idle %s: %v CPU in %v (%.3f%% of a core), %d wake-ups, %d threads\n",
			m.Target, m.CPU.Round(time.Microsecond), m.Wall.Round(time.Millisecond), 100*m.Share(), m.Wakeups, m.Threads)
	}
	return out
}

// measureIdle starts target, lets it settle and reads its CPU over d.
func measureIdle(ctx context.Context, cfg AnchorConfig, target string, settle, d time.Duration, sink *Sink, hsink *HTTPSink) (SweepIdle, error) {
	m := SweepIdle{Target: target}
	t, err := startAnchorTarget(ctx, cfg, target, "grpc", "none", sink, hsink)
	if err != nil {
		return m, err
	}
	defer t.proc.Stop()
	if err := sleepCtx(ctx, settle); err != nil {
		return m, err
	}
	pid := t.proc.Pid()
	c0, err := ReadProcCounters(pid)
	if err != nil {
		return m, err
	}
	cpu0, err := ProcCPU(pid)
	if err != nil {
		return m, err
	}
	start := time.Now()
	if err := sleepCtx(ctx, d); err != nil {
		return m, err
	}
	cpu1, err := ProcCPU(pid)
	if err != nil {
		return m, err
	}
	m.Wall = time.Since(start)
	c1, err := ReadProcCounters(pid)
	if err != nil {
		return m, err
	}
	m.CPU, m.Wakeups, m.Threads = cpu1-cpu0, c1.Voluntary-c0.Voluntary, c1.Threads
	m.RSS, _ = PeakRSS(pid)
	return m, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
