package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// AnchorConfig is an `otlpbench anchor` run: the measurement that places otlpgate against the
// physical floor and against its peers. Each proxy in turn runs pinned to one processor with
// GOMAXPROCS=1 while the load and the sink run on the others; an open loop sends semconv
// batches at a fixed rate through it to a gRPC sink (OTLP/gRPC unary v1 out, both hops in the
// same compression), and what the proxy process spent (user plus system time, from the
// kernel's CPU clock of the process: ProcCPU) is divided by the spans it delivered. The floor
// is a TCP relay (Relay) in the same run: what moving those bytes through a process costs the
// kernel alone.
type AnchorConfig struct {
	Gate     string   // otlpgate binary
	GateArgs []string // extra otlpgate flags
	// Top also measures otlpgate at -grpc.scan-depth=top (which sets both network intakes'
	// depth), beside its default full depth.
	Top bool
	// Bench is the otlpbench binary, run as `otlpbench relay` for the floor.
	Bench string
	// CopyFloor also measures the relay copying through a buffer in the process
	// (AnchorRelayCopy): the floor of any proxy that reads the bytes it forwards.
	CopyFloor bool
	// Peer is the Collector built by `make peer-otelcol`, "" for none. It gets PEER_LISTEN,
	// PEER_HTTP_LISTEN, PEER_TARGET (the sink's gRPC side), PEER_HTTP_TARGET (its OTLP/HTTP
	// side, for a configuration that exports over OTLP/HTTP) and PEER_COMPRESSION in its
	// environment.
	Peer     string
	PeerArgs []string
	Shape    otlpgen.Shape
	// Intakes are "grpc" (OTLP/gRPC unary v1) and "http" (OTLP/HTTP protobuf); Compressions
	// "none", "gzip" and "zstd", used by the load and by the proxy towards the sink alike.
	Intakes, Compressions []string
	Rate                  float64       // batches per second
	Duration, Warmup      time.Duration // measured and unmeasured sending per cell
	MaxInFlight           int           // unanswered requests before the open loop waits
	Rounds                int           // times the whole matrix runs; each cell reports the median
	// ProxyCPUs are the processors the proxy is pinned to; nil runs it unpinned.
	ProxyCPUs []int
	Dir       string // where the children's logs go
	// Base is a second otlpgate binary measured beside Gate in every round (rows
	// otlpgate-base and otlpgate-base-top), for before-and-after comparisons on a shared
	// machine: the two are measured minutes apart at most, under the same other load.
	Base     string
	BaseArgs []string // the base's extra flags, in place of GateArgs
	// Out is how otlpgate sends to the sink: "grpc" (OTLP/gRPC unary v1, the default) or
	// "http" (OTLP/HTTP protobuf, protocol=http, to the sink's HTTP listener). The relay and
	// the peer are not affected.
	Out string
	// DestOpts and BaseDestOpts are appended to the sink destination's -dest value of Gate
	// and of Base (",write-buffer=1MiB").
	DestOpts, BaseDestOpts string
	// Strace attaches strace(1) to each proxy for the measured phase and reports its system
	// calls per batch by kind and size; the CPU figures of such a run are strace's.
	Strace bool
	// Profile saves a CPU profile of each otlpgate cell's measured phase in Dir.
	Profile bool
	// Trace saves a Go execution trace of the first seconds (at most 3) of each otlpgate
	// cell's measured phase in Dir and counts its scheduling per batch (Scheduling), with
	// `go tool trace`.
	Trace bool
	// OwnProcs leaves the proxies' GOMAXPROCS to their runtime (as deployed: the sweep)
	// instead of setting it to 1.
	OwnProcs bool
	// LogPrefix starts the names of the children's logs in Dir; "" is "anchor".
	LogPrefix string
}

// AnchorCell is one proxy's measurement in one intake and compression, the median round's.
type AnchorCell struct {
	Target, Intake, Compression string
	Spans                       int64         // spans the sink received in the measured phase
	CPU                         time.Duration // the proxy's user+system time in that phase
	Sent, Failed, Late          int
	Err                         string // why the cell has no figure
	// Batches are the requests answered in the measured phase; Counters what the kernel and
	// the Go runtime counted of the proxy meanwhile (ProcCounters).
	Batches  int
	Counters ProcCounters
	Syscalls string // strace's count per batch, with -strace
	Profile  string // the CPU profile's file, with -profile
	Sched    string // the execution trace's scheduling per batch, with -trace
	// P50 and P99 are the client's latencies of the measured phase (openLoadResult.Latencies),
	// Wall its length, PeakRSS the proxy's resident-set high-water mark at its end.
	P50, P99, Wall time.Duration
	PeakRSS        int64
	rounds         []float64
}

// CPUPerSpan is the proxy's CPU time per delivered span, in microseconds; 0 when unknown.
func (c AnchorCell) CPUPerSpan() float64 {
	if c.Spans == 0 || c.CPU <= 0 {
		return 0
	}
	return float64(c.CPU) / 1e3 / float64(c.Spans)
}

// AnchorResult is a whole run.
type AnchorResult struct {
	Config    AnchorConfig
	SpanBytes int            // bytes per span of an uncompressed request body
	Wire      map[string]int // bytes of a request body on the wire, by compression
	Pinned    string         // the processors the kernel held the proxies to, from /proc
	Targets   []string
	Cells     []AnchorCell
}

// Cell returns the cell of target, intake and compression, or nil.
func (r *AnchorResult) Cell(target, intake, compression string) *AnchorCell {
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Target == target && c.Intake == intake && c.Compression == compression {
			return c
		}
	}
	return nil
}

// RelayCopyBuffer is the copy relay's buffer per direction: otlpgate's gRPC read buffer size
// (-grpc.read-buffer), larger than a socket hands over in one read on loopback.
const RelayCopyBuffer = 256 << 10

// The anchor's targets: the floor first, so that every ratio has its denominator.
const (
	AnchorRelay = "tcp-relay"
	// AnchorRelayCopy is the relay reading into a buffer and writing from it (RelayCopyBuffer).
	AnchorRelayCopy = "tcp-relay-copy"
	AnchorGate      = "otlpgate"
	AnchorTop       = "otlpgate-top"
	// AnchorBase and AnchorBaseTop are AnchorConfig.Base at either depth.
	AnchorBase    = "otlpgate-base"
	AnchorBaseTop = "otlpgate-base-top"
)

// RunAnchor runs the matrix: per round, compression and intake, each target in turn, so that
// the cells compared with one another are measured minutes apart at most.
func RunAnchor(ctx context.Context, cfg AnchorConfig, progress io.Writer) (*AnchorResult, error) {
	sink, hsink, stop, err := startSinks()
	if err != nil {
		return nil, err
	}
	defer stop()

	res := &AnchorResult{Config: cfg, Wire: map[string]int{}}
	res.Targets = []string{AnchorRelay}
	if cfg.CopyFloor {
		res.Targets = append(res.Targets, AnchorRelayCopy)
	}
	res.Targets = append(res.Targets, AnchorGate)
	if cfg.Top {
		res.Targets = append(res.Targets, AnchorTop)
	}
	if cfg.Base != "" {
		res.Targets = append(res.Targets, AnchorBase)
		if cfg.Top {
			res.Targets = append(res.Targets, AnchorBaseTop)
		}
	}
	if cfg.Peer != "" {
		res.Targets = append(res.Targets, filepath.Base(cfg.Peer))
	}
	bodies := map[string]*anchorBodies{}
	for _, comp := range cfg.Compressions {
		b, size, err := buildBodies(ctx, cfg.Shape, 8, comp, sink.Addr())
		if err != nil {
			return nil, err
		}
		bodies[comp] = b
		res.Wire[comp] = b.wire
		res.SpanBytes = size / cfg.Shape.Spans
	}
	for _, comp := range cfg.Compressions {
		for _, intake := range cfg.Intakes {
			for _, target := range res.Targets {
				res.Cells = append(res.Cells, AnchorCell{Target: target, Intake: intake, Compression: comp})
			}
		}
	}
	for round := range max(cfg.Rounds, 1) {
		for i := range res.Cells {
			c := &res.Cells[i]
			m, err := runAnchorCell(ctx, cfg, c.Target, c.Intake, bodies[c.Compression], sink, hsink, res, progress)
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			if err != nil {
				c.Err = err.Error()
				fmt.Fprintf(progress, "round %d %s %s/%s: %v\n", round+1, c.Target, c.Intake, c.Compression, err)
				continue
			}
			fmt.Fprintf(progress, "round %d %s %s/%s: %d spans, %v CPU, %.3f µs/span, %d failed, %d late\n",
				round+1, c.Target, c.Intake, c.Compression, m.Spans, m.CPU, m.CPUPerSpan(), m.Failed, m.Late)
			c.rounds = append(c.rounds, m.CPUPerSpan())
			// The cell keeps the measurement nearest the median so far: the table's figure is
			// one real run, with its own counts.
			if med := median(c.rounds); c.Spans == 0 || abs(m.CPUPerSpan()-med) < abs(c.CPUPerSpan()-med) {
				c.Spans, c.CPU, c.Sent, c.Failed, c.Late = m.Spans, m.CPU, m.Sent, m.Failed, m.Late
				c.Batches, c.Counters, c.Syscalls, c.Profile, c.Sched = m.Batches, m.Counters, m.Syscalls, m.Profile, m.Sched
			}
		}
	}
	return res, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func abs(x float64) float64 { return max(x, -x) }

// anchorTarget is a proxy of a cell, started and listening.
type anchorTarget struct {
	proc                 *Proc
	listen, admin, pprof string // admin and pprof are otlpgate's, "" for the others
	log                  string
}

// startAnchorTarget starts target for intake and compression and waits until it listens.
// otlpgate and the relay bind :0 and report their ports (Proc.Listening); the peer is given
// ports chosen here, as its configuration names them. The caller stops the process.
func startAnchorTarget(ctx context.Context, cfg AnchorConfig, target, intake, compression string, sink *Sink, hsink *HTTPSink) (*anchorTarget, error) {
	grpcListen, httpListen := AnyPort, AnyPort
	if !isGate(target) && target != AnchorRelay && target != AnchorRelayCopy {
		addrs, err := FreeAddrs(2)
		if err != nil {
			return nil, err
		}
		grpcListen, httpListen = addrs[0], addrs[1]
	}
	var env []string
	if !cfg.OwnProcs {
		env = append(env, "GOMAXPROCS=1")
	}
	var bin string
	var args []string
	listen := grpcListen
	if intake == "http" {
		listen = httpListen
	}
	switch target {
	case AnchorRelay, AnchorRelayCopy:
		// The relay moves the load's bytes as they are, so on the HTTP intake it goes to the
		// sink's OTLP/HTTP side.
		to := sink.Addr()
		if intake == "http" {
			to = hsink.Addr()
		}
		bin, args = cfg.Bench, []string{"relay", "-listen", listen, "-target", to}
		if target == AnchorRelayCopy {
			args = append(args, "-buffer", fmt.Sprint(RelayCopyBuffer))
		}
	case AnchorGate, AnchorTop, AnchorBase, AnchorBaseTop:
		dest := "name=sink,endpoint=" + sink.Addr() + ",protocol=v1,mode=unary"
		if cfg.Out == "http" {
			dest = "name=sink,endpoint=http://" + hsink.Addr() + ",protocol=http"
		}
		if compression != "none" {
			dest += ",compression=" + compression
		}
		extra, opts := cfg.GateArgs, cfg.DestOpts
		bin = cfg.Gate
		if target == AnchorBase || target == AnchorBaseTop {
			bin, extra, opts = cfg.Base, cfg.BaseArgs, cfg.BaseDestOpts
		}
		dest += opts
		args = append([]string{"-grpc.listen", AnyPort, "-http.listen", AnyPort, "-admin.listen", AnyPort,
			"-pprof.listen", AnyPort, "-uds.listen", "", "-dest", dest}, extra...)
		if target == AnchorTop || target == AnchorBaseTop {
			args = append(args, "-grpc.scan-depth=top")
		}
	default:
		bin, args = cfg.Peer, cfg.PeerArgs
		env = append(env, "PEER_LISTEN="+grpcListen, "PEER_HTTP_LISTEN="+httpListen, "PEER_TARGET="+sink.Addr(),
			"PEER_HTTP_TARGET=http://"+hsink.Addr(), "PEER_COMPRESSION="+compression)
	}
	logPath := filepath.Join(cfg.Dir, fmt.Sprintf("%s-%s-%s-%s.log", cmp.Or(cfg.LogPrefix, "anchor"), target, intake, compression))
	var proc *Proc
	var err error
	if cfg.ProxyCPUs != nil {
		proc, err = StartPinnedProc(target, bin, args, env, logPath, cfg.ProxyCPUs)
	} else {
		proc, err = StartProc(target, bin, args, env, logPath)
	}
	if err != nil {
		return nil, err
	}
	t := &anchorTarget{proc: proc, log: logPath}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	switch {
	case isGate(target):
		var addrs []string
		if addrs, err = proc.Listening(wctx, listenlog.GRPC, listenlog.HTTP, listenlog.Admin, listenlog.Pprof); err == nil {
			listen = addrs[0]
			if intake == "http" {
				listen = addrs[1]
			}
			t.admin, t.pprof = addrs[2], addrs[3]
		}
	case target == AnchorRelay || target == AnchorRelayCopy:
		var addrs []string
		if addrs, err = proc.Listening(wctx, listenlog.Relay); err == nil {
			listen = addrs[0]
		}
	}
	if err == nil {
		err = WaitListening(wctx, listen)
	}
	if err != nil {
		proc.Stop()
		return nil, fmt.Errorf("%w (log: %s)", err, logPath)
	}
	t.listen = listen
	return t, nil
}

func isGate(target string) bool {
	return target == AnchorGate || target == AnchorTop || target == AnchorBase || target == AnchorBaseTop
}

// runAnchorCell starts target, warms it up, measures it and stops it.
func runAnchorCell(ctx context.Context, cfg AnchorConfig, target, intake string, bodies *anchorBodies,
	sink *Sink, hsink *HTTPSink, res *AnchorResult, progress io.Writer) (AnchorCell, error) {
	m := AnchorCell{Target: target, Intake: intake, Compression: bodies.compression}
	t, err := startAnchorTarget(ctx, cfg, target, intake, bodies.compression, sink, hsink)
	if err != nil {
		return m, err
	}
	proc, listen, admin, pprof := t.proc, t.listen, t.admin, t.pprof
	defer proc.Stop()
	if cpus, err := ProcCPUs(proc.Pid()); err == nil {
		if res.Pinned == "" {
			res.Pinned = cpus
		} else if cpus != res.Pinned {
			fmt.Fprintf(progress, "%s runs on CPUs %s, the proxies before it on %s\n", target, cpus, res.Pinned)
		}
	}

	spans := int64(cfg.Shape.Spans)
	warm, warmFor := loadCount(cfg.Rate, cfg.Warmup)
	wr, err := runOpenLoad(ctx, listen, intake, bodies, warm, cfg.Rate, cfg.MaxInFlight, warmFor)
	if err != nil {
		return m, err
	}
	if wr.Failed > 0 {
		return m, fmt.Errorf("warm-up: %d of %d requests failed: %v", wr.Failed, wr.Sent, wr.FirstErr)
	}
	if err := waitSpans(ctx, sink, int64(wr.Acked)*spans); err != nil {
		return m, fmt.Errorf("warm-up: %w", err)
	}
	sink.Reset()

	n, measureFor := loadCount(cfg.Rate, cfg.Duration)
	base := filepath.Join(cfg.Dir, fmt.Sprintf("anchor-%s-%s-%s", target, intake, bodies.compression))
	var tracer *Tracer
	if cfg.Strace {
		if tracer, err = StartTracer(proc.Pid(), base+".strace"); err != nil {
			return m, err
		}
		defer tracer.Stop()
	}
	var profiled <-chan error
	if cfg.Profile && pprof != "" {
		m.Profile = base + ".cpu.pprof"
		profiled = profileCPU(pprof, cfg.Duration, m.Profile)
	}
	var traced <-chan error
	traceSecs := max(min(3, int(cfg.Duration.Seconds()/2)), 1)
	if cfg.Trace && pprof != "" {
		done := make(chan error, 1)
		traced = done
		go func() {
			done <- Fetch(fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%d", pprof, traceSecs), base+".trace")
		}()
	}
	count0, err := ReadProcCounters(proc.Pid())
	if err != nil {
		return m, err
	}
	if admin != "" {
		count0.GC = gcCycles(admin)
	}
	cpu0, err := ProcCPU(proc.Pid())
	if err != nil {
		return m, err
	}
	lr, err := runOpenLoad(ctx, listen, intake, bodies, n, cfg.Rate, cfg.MaxInFlight, measureFor)
	if err != nil {
		return m, err
	}
	// The proxy's work on the measured requests ends when the sink has their last span.
	if err := waitSpans(ctx, sink, int64(lr.Acked)*spans); err != nil {
		return m, err
	}
	cpu1, err := ProcCPU(proc.Pid())
	if err != nil {
		return m, err
	}
	count1, err := ReadProcCounters(proc.Pid())
	if err != nil {
		return m, err
	}
	if admin != "" {
		count1.GC = gcCycles(admin)
	}
	if tracer != nil {
		tracer.Stop()
		if f, err := os.Open(tracer.path); err == nil {
			sc, perr := ParseStrace(f)
			f.Close()
			if perr == nil {
				m.Syscalls = sc.Summary(lr.Acked, 4<<10)
			}
		}
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			fmt.Fprintf(progress, "%s %s/%s: no CPU profile: %v\n", target, intake, bodies.compression, err)
			m.Profile = ""
		}
	}
	if traced != nil {
		err := <-traced
		var s Scheduling
		if err == nil {
			s, err = ReadTraceFile(base + ".trace")
		}
		if err != nil {
			fmt.Fprintf(progress, "%s %s/%s: no execution trace: %v\n", target, intake, bodies.compression, err)
		} else {
			// The open loop sends at the rate, so the trace's seconds hold rate x seconds batches.
			m.Sched = s.Summary(int(cfg.Rate * float64(traceSecs)))
		}
	}
	m.PeakRSS, _ = PeakRSS(proc.Pid())
	m.P50, m.P99, m.Wall = Percentile(lr.Latencies, 0.5), Percentile(lr.Latencies, 0.99), lr.Wall
	_, got, bad := sink.Counts()
	m.Spans, m.CPU = got, cpu1-cpu0
	m.Sent, m.Failed, m.Late = lr.Sent, lr.Failed, lr.Late
	m.Batches, m.Counters = lr.Acked, count1.sub(count0)
	sink.Reset()
	if bad > 0 {
		return m, fmt.Errorf("the sink could not read %d requests", bad)
	}
	if lr.Failed > 0 {
		fmt.Fprintf(progress, "%s %s/%s: %d of %d requests failed: %v\n", target, intake, bodies.compression, lr.Failed, lr.Sent, lr.FirstErr)
	}
	return m, nil
}

// loadCount is how many requests a phase of d sends at rate batches per second, at least one;
// without a rate (a closed loop) as many as fit in d, which it returns as the bound on the time.
func loadCount(rate float64, d time.Duration) (int, time.Duration) {
	if rate <= 0 {
		return math.MaxInt, d
	}
	return max(int(d.Seconds()*rate), 1), 0
}

// waitSpans waits until the sink has received want spans, for at most 60 s.
func waitSpans(ctx context.Context, s *Sink, want int64) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, got, _ := s.Counts()
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sink received %d spans of %d", got, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WriteAnchor prints the run as a Markdown table: CPU-µs per span of each proxy in each
// intake and compression, with its ratio to the relay floor of the same column.
func WriteAnchor(w io.Writer, r *AnchorResult) {
	cfg := r.Config
	pinned := "unpinned"
	if cfg.ProxyCPUs != nil {
		pinned = "pinned to CPU " + r.Pinned + " with GOMAXPROCS=1"
	}
	fmt.Fprintf(w, "anchor: %d-span batches of %d B per span, %.0f batches/s open loop, %v measured per cell after %v warm-up, median of %d round(s); each proxy %s, load and sink on the other CPUs\n",
		cfg.Shape.Spans, r.SpanBytes, cfg.Rate, cfg.Duration, cfg.Warmup, max(cfg.Rounds, 1), pinned)
	var sizes []string
	for _, c := range cfg.Compressions {
		sizes = append(sizes, fmt.Sprintf("%s %d KiB", c, r.Wire[c]>>10))
	}
	fmt.Fprintf(w, "request body on the wire: %s\n", strings.Join(sizes, ", "))
	if cfg.Out == "http" {
		fmt.Fprintf(w, "otlpgate sends to the sink over OTLP/HTTP protobuf (protocol=http)\n")
	}
	if cfg.CopyFloor {
		fmt.Fprintf(w, "ratios: to tcp-relay (splice, the bytes never enter the process); \"copy\" to tcp-relay-copy (each byte read into a %d KiB buffer and written out)\n", RelayCopyBuffer>>10)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| CPU-µs per span (x relay) |")
	for _, comp := range cfg.Compressions {
		for _, in := range cfg.Intakes {
			fmt.Fprintf(w, " %s %s |", map[string]string{"grpc": "OTLP/gRPC", "http": "OTLP/HTTP"}[in], comp)
		}
	}
	fmt.Fprintf(w, "\n| --- |%s\n", strings.Repeat(" --- |", len(cfg.Compressions)*len(cfg.Intakes)))
	for _, t := range r.Targets {
		fmt.Fprintf(w, "| %s |", t)
		for _, comp := range cfg.Compressions {
			for _, in := range cfg.Intakes {
				c, floor, copyFloor := r.Cell(t, in, comp), r.Cell(AnchorRelay, in, comp), r.Cell(AnchorRelayCopy, in, comp)
				switch {
				case c == nil || c.CPUPerSpan() == 0:
					fmt.Fprintf(w, " - |")
				case t == AnchorRelay || floor == nil || floor.CPUPerSpan() == 0:
					fmt.Fprintf(w, " %.2f |", c.CPUPerSpan())
				case t == AnchorRelayCopy || copyFloor == nil || copyFloor.CPUPerSpan() == 0:
					fmt.Fprintf(w, " %.2f (%.1fx) |", c.CPUPerSpan(), c.CPUPerSpan()/floor.CPUPerSpan())
				default:
					fmt.Fprintf(w, " %.2f (%.1fx; %.1fx copy) |", c.CPUPerSpan(), c.CPUPerSpan()/floor.CPUPerSpan(), c.CPUPerSpan()/copyFloor.CPUPerSpan())
				}
			}
		}
		fmt.Fprintln(w)
	}
	writeAnchorCounts(w, r)
	for _, c := range r.Cells {
		if c.Err != "" {
			fmt.Fprintf(w, "\n%s %s/%s: %s", c.Target, c.Intake, c.Compression, c.Err)
		}
		if c.Failed > 0 || c.Late > 0 {
			fmt.Fprintf(w, "\n%s %s/%s: %d of %d requests failed, %d sent late (the run fell behind the rate: the proxy, or the load and sink on their CPUs)", c.Target, c.Intake, c.Compression, c.Failed, c.Sent, c.Late)
		}
	}
	fmt.Fprintln(w)
}

// writeAnchorCounts prints what the kernel and the runtime counted of each cell per batch
// (ProcCounters), and with -strace the system calls by kind and size, with -profile where the
// profiles are.
func writeAnchorCounts(w io.Writer, r *AnchorResult) {
	fmt.Fprintf(w, "\n| per batch | read calls (syscr) | write calls (syscw) | voluntary switches | involuntary switches | GC cycles | threads |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range r.Cells {
		if c.Batches == 0 {
			continue
		}
		per := func(n int64) string { return fmt.Sprintf("%.2f", float64(n)/float64(c.Batches)) }
		gc := "-"
		if c.Counters.GC >= 0 {
			gc = per(c.Counters.GC)
		}
		fmt.Fprintf(w, "| %s %s/%s | %s | %s | %s | %s | %s | %d |\n", c.Target, c.Intake, c.Compression,
			per(c.Counters.SysCR), per(c.Counters.SysCW), per(c.Counters.Voluntary), per(c.Counters.Involuntary), gc, c.Counters.Threads)
	}
	for _, c := range r.Cells {
		if c.Syscalls != "" {
			fmt.Fprintf(w, "\nstrace, %s %s/%s, per batch: %s\n", c.Target, c.Intake, c.Compression, c.Syscalls)
		}
	}
	for _, c := range r.Cells {
		if c.Sched != "" {
			fmt.Fprintf(w, "\nexecution trace, %s %s/%s, per batch: %s\n", c.Target, c.Intake, c.Compression, c.Sched)
		}
	}
	for _, c := range r.Cells {
		if c.Profile != "" {
			fmt.Fprintf(w, "\nCPU profile, %s %s/%s: %s", c.Target, c.Intake, c.Compression, c.Profile)
		}
	}
}
