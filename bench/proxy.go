package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// ProxyConfig is an `otlpbench proxy` run.
type ProxyConfig struct {
	Gate     string   // otlpgate binary
	GateArgs []string // extra flags for otlpgate
	Bench    string   // the otlpbench binary, run as `otlpbench forward` (the floor); "" skips the floor
	Peer     string   // another proxy binary to measure in the same run, or ""
	PeerArgs []string // its arguments; it gets PEER_LISTEN, PEER_HTTP_LISTEN and PEER_TARGET in its environment
	// Intake is how the load reaches otlpgate and the peer: "grpc" (OTLP/gRPC unary v1),
	// "http-proto" or "http-json" (OTLP/HTTP). Both forward to the sink over gRPC either way.
	// The direct run and the floor are always loaded over gRPC: the sink and the bare forwarder
	// speak nothing else.
	Intake   string
	Shape    otlpgen.Shape
	InFlight int
	Batches  int     // closed-loop batches per target
	Rate     float64 // batches per second of the latency phase
	RateN    int     // batches of the latency phase
	Dir      string  // where the children's logs go
	// Fleet, when positive, also measures otlpgate with a balanced destination (balance=trace_id,
	// resolver=static) over that many backends: as many more listeners of the sink.
	Fleet int
	// AllocProfileRate, when positive, runs otlpgate and the floor with
	// GODEBUG=memprofilerate=N: their allocation profiles record one allocation per N bytes
	// instead of per 512 KiB. With 1 every allocation is recorded with its stack, and the
	// own/other split is a count, not an estimate (at a CPU cost to the measured process).
	AllocProfileRate int
	// Header and HeaderValues are sent with every load request (LoadConfig.Header): tenants
	// for otlpgate's -intake.headers.
	Header       string
	HeaderValues []string
	// NoDirect skips the direct load -> sink run (its latency is the baseline of the +p columns),
	// and a RateN of 0 the latency phase: for runs that compare CPU only (otlpbench processing).
	NoDirect bool
}

// childEnv is the environment the measured Go children get on top of the tool's own.
func (cfg ProxyConfig) childEnv() []string {
	if cfg.AllocProfileRate <= 0 {
		return nil
	}
	v := fmt.Sprintf("memprofilerate=%d", cfg.AllocProfileRate)
	if old := os.Getenv("GODEBUG"); old != "" {
		v = old + "," + v
	}
	return []string{"GODEBUG=" + v}
}

// ProxyResult is one target's measurements.
type ProxyResult struct {
	Target         string
	Spans          int
	Wall           time.Duration
	CPU            time.Duration // the proxy process's user+system time in the closed-loop phase
	AllocsPerBatch float64       // -1 when unknown
	// OwnAllocs and OtherAllocs split AllocsPerBatch by the frame that allocated, from an
	// allocation profile of the measured phase (SplitAllocs): otlpgate's own code, and grpc-go,
	// x/net, the standard library and the runtime. An estimate from samples, unless
	// AllocProfileRate is 1. -1 when unknown.
	OwnAllocs, OtherAllocs float64
	PeakRSS                int64
	P50, P99, P999         time.Duration // end to end, latency phase
	Received, Refused      int
	Retried                int // sends of the closed-loop phase refused as retryable and sent again (OTLP/HTTP)
	// Upstream is the requests the sink received in the closed-loop phase, RateUpstream in the
	// latency phase (RateN requests at Rate): over the requests sent, how well the proxy batches
	// under a closed loop and at a moderate fixed rate.
	Upstream, RateUpstream int
}

// CPUPerSpan is the proxy's CPU time per forwarded span.
func (r ProxyResult) CPUPerSpan() time.Duration {
	if r.Spans == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Spans)
}

// RunProxy measures load -> sink directly, then through otlpgate, then through the peer.
func RunProxy(ctx context.Context, cfg ProxyConfig, progress io.Writer) ([]ProxyResult, error) {
	sink, err := StartSink("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	var out []ProxyResult

	run := func(name, target, protocol string, proc *Proc, adminURL, pprofURL string) (ProxyResult, error) {
		res := ProxyResult{Target: name, AllocsPerBatch: -1, OwnAllocs: -1, OtherAllocs: -1}
		metricsURL := ""
		if adminURL != "" {
			metricsURL = adminURL + "/metrics"
		}
		load := LoadConfig{Target: target, Protocol: protocol, Shape: cfg.Shape, InFlight: cfg.InFlight, Seed: 7,
			Header: cfg.Header, HeaderValues: cfg.HeaderValues, Conns: &LoadConns{}}
		defer load.Conns.Close()
		// Warm up: connections, pools, the peer's JIT-free but cache-cold start. Half of it runs
		// at twice the measured concurrency, so that what a proxy keeps for reuse (otlpgate's
		// free lists and buffer reserves) is stocked for a higher peak of batches in flight
		// than the measured phase reaches, as internal/zeroalloc's tests do: a new peak's
		// objects are made once in a process's life, not per batch.
		warm := max(cfg.Batches/10, 20)
		load.Batches, load.InFlight = warm/2, 2*cfg.InFlight
		if _, err := RunLoad(ctx, load); err != nil {
			return res, fmt.Errorf("%s warm-up: %w", name, err)
		}
		load.Batches, load.InFlight = warm-warm/2, cfg.InFlight
		if _, err := RunLoad(ctx, load); err != nil {
			return res, fmt.Errorf("%s warm-up: %w", name, err)
		}
		waitSink(sink, warm)
		sink.Reset()

		var cpu0 Usage
		var mallocs0 float64
		if proc != nil {
			cpu0, _ = ProcUsage(proc.Pid())
		}
		var prof0 *profile.Profile
		if metricsURL != "" {
			mallocs0, _ = ScrapeCounter(metricsURL, "go_memstats_mallocs_total")
			prof0, _ = FetchAllocProfile(pprofURL)
		}
		load.Batches = cfg.Batches
		fmt.Fprintf(progress, "%s: %d batches, %d in flight, closed loop\n", name, cfg.Batches, cfg.InFlight)
		lr, err := RunLoad(ctx, load)
		if err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		waitSink(sink, cfg.Batches)
		res.Wall = lr.Wall
		if proc != nil {
			cpu1, _ := ProcUsage(proc.Pid())
			res.CPU = cpu1.Sub(cpu0).Total()
			res.PeakRSS, _ = PeakRSS(proc.Pid())
		}
		if metricsURL != "" {
			if m1, err := ScrapeCounter(metricsURL, "go_memstats_mallocs_total"); err == nil {
				res.AllocsPerBatch = (m1 - mallocs0) / float64(cfg.Batches)
			}
			if prof1, err := FetchAllocProfile(pprofURL); err == nil && prof0 != nil && res.AllocsPerBatch >= 0 {
				if sp, err := SplitAllocs(prof0, prof1); err == nil {
					res.OwnAllocs = res.AllocsPerBatch * sp.OwnShare()
					if cfg.AllocProfileRate == 1 {
						// Every allocation is in the profile, unscaled: own is a count.
						res.OwnAllocs = min(sp.Own/float64(cfg.Batches), res.AllocsPerBatch)
					}
					res.OtherAllocs = res.AllocsPerBatch - res.OwnAllocs
					writeOwnSites(progress, name, sp, cfg.Batches)
				}
			}
		}
		up, spans, _ := sink.Counts()
		res.Spans, res.Upstream = int(spans), int(up)
		res.Received, res.Refused, res.Retried = lr.Acked, lr.Failed, lr.Retried
		if lr.Retried > 0 {
			fmt.Fprintf(progress, "%s: %d sends answered retryable and sent again\n", name, lr.Retried)
		}

		sink.Reset()
		if cfg.RateN <= 0 {
			return res, nil
		}
		load.Batches, load.Rate = cfg.RateN, cfg.Rate
		fmt.Fprintf(progress, "%s: %d batches at %.0f/s for latency\n", name, cfg.RateN, cfg.Rate)
		if _, err := RunLoad(ctx, load); err != nil {
			return res, fmt.Errorf("%s latency: %w", name, err)
		}
		waitSink(sink, cfg.RateN)
		up, _, _ = sink.Counts()
		res.RateUpstream = int(up)
		lat := sink.Latencies()
		res.P50, res.P99, res.P999 = Percentile(lat, 0.5), Percentile(lat, 0.99), Percentile(lat, 0.999)
		sink.Reset()
		return res, nil
	}

	proxied := "v1"
	if cfg.Intake == "http-proto" || cfg.Intake == "http-json" {
		proxied = cfg.Intake
	}
	if !cfg.NoDirect {
		direct, err := run("direct", sink.Addr(), "v1", nil, "", "")
		if err != nil {
			return nil, err
		}
		out = append(out, direct)
	}

	// The floor: a bare grpc-go forwarder, one unary call out per call in.
	if cfg.Bench != "" {
		fw, err := StartProc("grpc-forward", cfg.Bench, []string{"forward", "-listen", AnyPort, "-target", sink.Addr(), "-admin", AnyPort},
			cfg.childEnv(), filepath.Join(cfg.Dir, "grpc-forward.log"))
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		addrs, err := fw.Listening(wctx, listenlog.Forward, listenlog.Admin)
		cancel()
		if err != nil {
			fw.Stop()
			return nil, err
		}
		listen, admin := addrs[0], addrs[1]
		r, err := run("grpc-forward", listen, "v1", fw, "http://"+admin, "http://"+admin)
		fw.Stop()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}

	// otlpgate, forwarding to the sink over a pipelined OTEP stream; then, with Fleet, to a
	// fleet of sink addresses, each batch split by trace id. Its listeners bind ports the kernel
	// chooses (the default ones may be taken on a shared machine), read from its log.
	runGate := func(name, dest string) error {
		args := append([]string{"-grpc.listen", AnyPort, "-http.listen", AnyPort, "-admin.listen", AnyPort, "-pprof.listen", AnyPort, "-uds.listen", "",
			"-dest", dest}, cfg.GateArgs...)
		gate, err := StartProc(name, cfg.Gate, args, cfg.childEnv(), filepath.Join(cfg.Dir, name+".log"))
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		addrs, err := gate.Listening(wctx, listenlog.GRPC, listenlog.HTTP, listenlog.Admin, listenlog.Pprof)
		cancel()
		if err != nil {
			gate.Stop()
			return err
		}
		listen, httpListen, admin, pprofAddr := addrs[0], addrs[1], addrs[2], addrs[3]
		gateTarget := listen
		if proxied != "v1" {
			gateTarget = httpListen
		}
		r, err := run(name, gateTarget, proxied, gate, "http://"+admin, "http://"+pprofAddr)
		gate.Stop()
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}
	if err := runGate("otlpgate", "name=sink,endpoint="+sink.Addr()+",protocol=otep,mode=stream,streams=2,window=256"); err != nil {
		return nil, err
	}
	if cfg.Fleet > 0 {
		var addrs []string
		for range cfg.Fleet {
			a, err := sink.ServeAlso("127.0.0.1:0")
			if err != nil {
				return out, err
			}
			addrs = append(addrs, a)
		}
		dest := "name=fleet,protocol=otep,mode=stream,streams=2,window=256,resolver=static,endpoints=" +
			strings.Join(addrs, "|") + ",balance=trace_id"
		if err := runGate(fmt.Sprintf("otlpgate-fleet%d", cfg.Fleet), dest); err != nil {
			return out, err
		}
	}

	if cfg.Peer != "" {
		addrs, err := FreeAddrs(2) // the peer's configuration names its ports
		if err != nil {
			return out, err
		}
		listen, httpListen := addrs[0], addrs[1]
		peer, err := StartProc("peer", cfg.Peer, cfg.PeerArgs,
			[]string{"PEER_LISTEN=" + listen, "PEER_HTTP_LISTEN=" + httpListen, "PEER_TARGET=" + sink.Addr()}, filepath.Join(cfg.Dir, "peer.log"))
		if err != nil {
			return out, err
		}
		target := listen
		if proxied != "v1" {
			target = httpListen
		}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = WaitListening(wctx, target)
		cancel()
		if err != nil {
			peer.Stop()
			return out, err
		}
		r, err := run(filepath.Base(cfg.Peer), target, proxied, peer, "", "")
		peer.Stop()
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// waitSink waits (bounded) until the sink has seen n batches' worth of stamps: a proxy may merge
// requests, so it counts latencies, one per request.
func waitSink(s *Sink, n int) {
	for range 3000 {
		s.mu.Lock()
		got := len(s.mu.lat)
		s.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WriteProxy prints the results and, for every proxy, its added latency over the direct run and
// its upstream requests per intake request (out/in: closed loop, then the latency phase's fixed
// rate); with a peer, the ratio of the peer's CPU per span to otlpgate's.
func WriteProxy(w io.Writer, rs []ProxyResult, rateN int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\tspans\tbatches/s\tout/in\tout/in@rate\tCPU-µs/span\tallocs/batch\town\tother\tpeak RSS MiB\tp50\tp99\tp999\t+p50\t+p99\t+p999\tretried\t\n")
	var direct ProxyResult
	for i, r := range rs {
		if i == 0 {
			direct = r
		}
		allocs, own, other := "-", "-", "-"
		if r.AllocsPerBatch >= 0 {
			allocs = fmt.Sprintf("%.0f", r.AllocsPerBatch)
		}
		if r.OwnAllocs >= 0 {
			own, other = fmt.Sprintf("%.1f", r.OwnAllocs), fmt.Sprintf("%.1f", r.OtherAllocs)
		}
		cpu, rss := "-", "-"
		if r.CPU > 0 {
			cpu = fmt.Sprintf("%.3f", float64(r.CPUPerSpan())/1e3)
			rss = fmt.Sprintf("%.0f", float64(r.PeakRSS)/(1<<20))
		}
		bps := float64(r.Received) / r.Wall.Seconds()
		ratio, rateRatio := "-", "-"
		if r.Received > 0 {
			ratio = fmt.Sprintf("%.3f", float64(r.Upstream)/float64(r.Received))
		}
		if rateN > 0 {
			rateRatio = fmt.Sprintf("%.3f", float64(r.RateUpstream)/float64(rateN))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%v\t%v\t%v\t%v\t%v\t%v\t%d\t\n", r.Target, r.Spans, bps, ratio, rateRatio, cpu, allocs, own, other, rss,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.P999.Round(time.Microsecond),
			(r.P50 - direct.P50).Round(time.Microsecond), (r.P99 - direct.P99).Round(time.Microsecond), (r.P999 - direct.P999).Round(time.Microsecond), r.Retried)
	}
	tw.Flush()
	var gate *ProxyResult
	for i := range rs {
		if rs[i].Target == "otlpgate" {
			gate = &rs[i]
		}
	}
	if last := rs[len(rs)-1]; gate != nil && gate.CPU > 0 && last.Target != "otlpgate" && last.Target != "grpc-forward" && last.CPU > 0 {
		fmt.Fprintf(w, "\n%s uses %.2fx otlpgate's CPU per span (otlpgate: %.3f µs, %s: %.3f µs)\n", last.Target,
			float64(last.CPUPerSpan())/float64(gate.CPUPerSpan()), float64(gate.CPUPerSpan())/1e3, last.Target, float64(last.CPUPerSpan())/1e3)
	}
}
