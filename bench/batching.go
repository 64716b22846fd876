package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// BatchPolicy is a set of otlpgate flags under a name: one batching policy to compare.
type BatchPolicy struct {
	Name string
	Args []string
	Gate string // another otlpgate binary to run it with (an older build); "" is BatchingConfig.Gate
}

// BatchingConfig is an `otlpbench batching` run: the same fixed-rate loads through otlpgate to
// the sink under each policy, Repeat times, the policies back to back within each round so that
// they share the machine's mood.
type BatchingConfig struct {
	Gate     string // otlpgate binary
	Policies []BatchPolicy
	Repeat   int
	Dir      string // where otlpgate's logs go

	// gRPC: unary v1 batches of Shape at each of Rates, Seconds long each.
	Shape    otlpgen.Shape
	Rates    []float64
	Seconds  float64
	InFlight int

	// UDS: Capture (OpenCensus daemon messages holding one trace export) replayed over UDSConns
	// connections at UDSRate in total, UDSExports times.
	Capture    []byte
	UDSRate    float64
	UDSExports int
	UDSConns   int
}

// BatchingResult is one measured run.
type BatchingResult struct {
	Load   string // "grpc 2000/s", "uds 9000/s"
	Policy string
	In     int           // intake requests (gRPC calls answered, trace exports written)
	Out    int           // upstream requests the sink received
	Items  int           // spans the sink received
	CPU    time.Duration // otlpgate's user+system time over the run
	Wall   time.Duration
	P50    time.Duration // intake send to sink arrival
	Direct time.Duration // the same load's p50 straight into the sink (gRPC), 0 when none
	Load1  float64       // the machine's 1-minute load average at the end
}

// CPUPerItem is otlpgate's CPU time per span received by the sink.
func (r BatchingResult) CPUPerItem() time.Duration {
	if r.Items == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Items)
}

// RunBatching runs every load under every policy.
func RunBatching(ctx context.Context, cfg BatchingConfig, progress io.Writer) ([]BatchingResult, error) {
	sink, err := StartSink("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	var out []BatchingResult
	for round := range cfg.Repeat {
		for _, rate := range cfg.Rates {
			// The baseline is measured in every round: the machine is shared.
			d, err := grpcAtRate(ctx, cfg, sink, sink.Addr(), rate)
			if err != nil {
				return out, fmt.Errorf("direct at %.0f/s: %w", rate, err)
			}
			fmt.Fprintf(progress, "direct %.0f/s: p50 %v\n", rate, d.P50)
			for _, pol := range cfg.Policies {
				r, err := withGate(ctx, cfg, sink, pol, round, func(g *gateRun) (BatchingResult, error) {
					return grpcAtRate(ctx, cfg, sink, g.grpc, rate, g.proc)
				})
				if err != nil {
					return out, err
				}
				r.Load, r.Direct = fmt.Sprintf("grpc %.0f/s", rate), d.P50
				fmt.Fprintf(progress, "%s %s: %d in, %d out\n", r.Load, r.Policy, r.In, r.Out)
				out = append(out, r)
			}
		}
		if len(cfg.Capture) == 0 {
			continue
		}
		for _, pol := range cfg.Policies {
			r, err := withGate(ctx, cfg, sink, pol, round, func(g *gateRun) (BatchingResult, error) {
				return udsAtRate(ctx, cfg, sink, g.socket, g.proc)
			})
			if err != nil {
				return out, err
			}
			r.Load = fmt.Sprintf("uds %.0f/s", cfg.UDSRate)
			fmt.Fprintf(progress, "%s %s: %d in, %d out\n", r.Load, r.Policy, r.In, r.Out)
			out = append(out, r)
		}
	}
	return out, nil
}

type gateRun struct {
	proc   *Proc
	grpc   string
	socket string
}

// withGate runs measure against a fresh otlpgate with pol's flags, forwarding to sink.
func withGate(ctx context.Context, cfg BatchingConfig, sink *Sink, pol BatchPolicy, round int,
	measure func(*gateRun) (BatchingResult, error)) (BatchingResult, error) {
	dir, err := os.MkdirTemp("", "otlpbench-batching-")
	if err != nil {
		return BatchingResult{}, err
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "daemon.sock")
	args := append([]string{"-grpc.listen", AnyPort, "-http.listen", AnyPort, "-admin.listen", AnyPort, "-uds.listen", socket,
		"-dest", "name=sink,endpoint=" + sink.Addr() + ",protocol=otep,mode=stream,streams=2,window=256"}, pol.Args...)
	name := fmt.Sprintf("otlpgate-%s-%d", strings.NewReplacer("=", "", "-", "", ".", "").Replace(pol.Name), round)
	bin := cfg.Gate
	if pol.Gate != "" {
		bin = pol.Gate
	}
	proc, err := StartProc(name, bin, args, nil, filepath.Join(cfg.Dir, name+".log"))
	if err != nil {
		return BatchingResult{}, err
	}
	defer proc.Stop()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	var listen string
	addrs, err := proc.Listening(wctx, listenlog.GRPC)
	if err == nil {
		listen = addrs[0]
	}
	// A connection that succeeds says the socket accepts (a stale file left by a killed
	// process would be there too).
	for err == nil {
		if c, derr := net.Dial("unix", socket); derr == nil || wctx.Err() != nil {
			if derr == nil {
				c.Close()
			}
			err = wctx.Err()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err != nil {
		return BatchingResult{}, fmt.Errorf("%s: %w", name, err)
	}
	r, err := measure(&gateRun{proc: proc, grpc: listen, socket: socket})
	r.Policy = pol.Name
	return r, err
}

// grpcAtRate sends cfg.Seconds of unary v1 batches at rate to target after a one-second warm-up,
// and measures, over the run, the sink's counts and latencies and proc's CPU (proc may be
// omitted: the direct run).
func grpcAtRate(ctx context.Context, cfg BatchingConfig, sink *Sink, target string, rate float64, proc ...*Proc) (BatchingResult, error) {
	load := LoadConfig{Target: target, Protocol: "v1", Shape: cfg.Shape, InFlight: cfg.InFlight, Rate: rate, Seed: 7}
	load.Batches = int(rate)
	if _, err := RunLoad(ctx, load); err != nil {
		return BatchingResult{}, err
	}
	waitSink(sink, load.Batches)
	sink.Reset()
	var cpu0 Usage
	if len(proc) > 0 {
		cpu0, _ = ProcUsage(proc[0].Pid())
	}
	load.Batches = int(rate * cfg.Seconds)
	lr, err := RunLoad(ctx, load)
	if err != nil {
		return BatchingResult{}, err
	}
	waitSink(sink, load.Batches)
	res := BatchingResult{In: lr.Acked, Wall: lr.Wall}
	if len(proc) > 0 {
		cpu1, _ := ProcUsage(proc[0].Pid())
		res.CPU = cpu1.Sub(cpu0).Total()
	}
	finishBatching(&res, sink)
	return res, nil
}

// udsAtRate replays cfg.Capture into socket: a warm-up of a tenth, then cfg.UDSExports at
// cfg.UDSRate, measured as grpcAtRate does.
func udsAtRate(ctx context.Context, cfg BatchingConfig, sink *Sink, socket string, proc *Proc) (BatchingResult, error) {
	warm := max(cfg.UDSExports/10, 1)
	if _, err := UDSRateLoad(ctx, socket, cfg.Capture, cfg.UDSConns, cfg.UDSRate, warm); err != nil {
		return BatchingResult{}, err
	}
	waitSink(sink, warm)
	sink.Reset()
	cpu0, _ := ProcUsage(proc.Pid())
	start := time.Now()
	sent, err := UDSRateLoad(ctx, socket, cfg.Capture, cfg.UDSConns, cfg.UDSRate, cfg.UDSExports)
	if err != nil {
		return BatchingResult{}, err
	}
	waitSink(sink, int(sent))
	res := BatchingResult{In: int(sent), Wall: time.Since(start)}
	cpu1, _ := ProcUsage(proc.Pid())
	res.CPU = cpu1.Sub(cpu0).Total()
	finishBatching(&res, sink)
	return res, nil
}

func finishBatching(res *BatchingResult, sink *Sink) {
	out, spans, _ := sink.Counts()
	res.Out, res.Items = int(out), int(spans)
	res.P50 = Percentile(sink.Latencies(), 0.5)
	res.Load1 = loadAverage()
	sink.Reset()
}

// loadAverage is the 1-minute load average, 0 when unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}

// UDSRateLoad writes capture (OpenCensus daemon messages with one trace export) n times over
// conns unix-socket connections at rate writes per second in total, each write's first trace id
// stamped with its send time (StampTraceID), and returns how many were written. Writes that
// fall behind the schedule go out at once, so the average rate holds on a busy machine.
func UDSRateLoad(ctx context.Context, socket string, capture []byte, conns int, rate float64, n int) (int64, error) {
	off := traceIDOffset(capture)
	if off < 0 {
		return 0, errors.New("bench: no trace id in the capture to stamp")
	}
	var sent atomic.Int64
	interval := time.Duration(float64(time.Second) * float64(conns) / rate)
	err := eachUDSConn(socket, conns, func(ci int, c net.Conn) error {
		quota := n / conns
		if ci < n%conns {
			quota++
		}
		own := bytes.Clone(capture) // stamped in place: one copy per connection
		// Connections start spread over one interval, not all at once.
		next := time.Now().Add(interval * time.Duration(ci) / time.Duration(conns))
		for range quota {
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return nil
				}
			}
			next = next.Add(interval)
			StampTraceID(own, off, time.Now().UnixNano())
			if err := writeUDS(c, own); err != nil {
				return err
			}
			sent.Add(1)
		}
		return nil
	})
	return sent.Load(), err
}

// traceIDOffset is the offset of the first span's 32 hex digits of trace id in an OpenCensus
// trace export, -1 when there is none.
func traceIDOffset(b []byte) int {
	key := []byte(`"traceId":"`)
	i := bytes.Index(b, key)
	if i < 0 || i+len(key)+32 > len(b) {
		return -1
	}
	return i + len(key)
}

// StampTraceID writes a stamp of the send time (unix nanoseconds) into the 32 hex digits of
// trace id at off: the 16 bytes they stand for begin with the stamp tag and the stamp, as a
// span's start time does in a generated batch, so the sink finds it the same way once otlpgate
// turned the export into OTLP. The last 7 bytes keep what they were.
func StampTraceID(b []byte, off int, nowNanos int64) {
	var id [9]byte
	id[0] = stampTag
	binary.LittleEndian.PutUint64(id[1:], uint64(nowNanos/1000)&stampMask|stampMagic)
	hex.Encode(b[off:off+18], id[:])
}

// WriteBatching prints one line per run: CPU per span, upstream requests per intake request,
// the p50 from intake to sink and, for gRPC, what otlpgate added to the direct p50.
func WriteBatching(w io.Writer, rs []BatchingResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "load\tpolicy\tin\tout\tout/in\tspans\tCPU-µs/span\tp50\t+p50\tload1\t\n")
	for _, r := range rs {
		ratio := "-"
		if r.In > 0 {
			ratio = fmt.Sprintf("%.3f", float64(r.Out)/float64(r.In))
		}
		added := "-"
		if r.Direct > 0 {
			added = (r.P50 - r.Direct).Round(time.Microsecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\t%.3f\t%v\t%s\t%.2f\t\n", r.Load, r.Policy, r.In, r.Out, ratio, r.Items,
			float64(r.CPUPerItem())/1e3, r.P50.Round(time.Microsecond), added, r.Load1)
	}
	tw.Flush()
}
