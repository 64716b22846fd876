package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// ProfileConfig is an `otlpbench profile` run.
type ProfileConfig struct {
	Gate     string
	Scenario string   // small, large, uds, kafka
	Out      string   // directory for the captures
	Seconds  int      // CPU profile length
	Repo     string   // repository root, for the UDS and Kafka captures
	Command  string   // as typed, recorded with the captures
	GateArgs []string // extra otlpgate flags, after the scenario's (a later flag wins)
}

// RunProfile runs otlpgate under the scenario's standard load and saves its CPU, allocs and
// heap profiles as OUT/DATE-SCENARIO-COMMIT.{cpu,allocs,heap}.pprof, with a .txt that records
// the command, commit, machine and load.
func RunProfile(ctx context.Context, cfg ProfileConfig, progress io.Writer) (string, error) {
	sink, err := StartSink("127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer sink.Close()
	sock := filepath.Join(os.TempDir(), fmt.Sprintf("otlpbench-%d.sock", os.Getpid()))
	args := []string{"-grpc.listen", AnyPort, "-http.listen", "", "-admin.listen", AnyPort, "-pprof.listen", AnyPort, "-uds.listen", "", "-batch.max-age=5ms",
		"-dest", "name=sink,endpoint=" + sink.Addr() + ",protocol=otep,mode=stream,streams=2,window=256"}
	listeners := []string{listenlog.GRPC, listenlog.Pprof}
	switch cfg.Scenario {
	case "uds":
		args = append(args, "-uds.listen", sock, "-uds.reporting-period", "1s")
	case "kafka":
		args = append(args, "-kafka.listen", AnyPort, "-kafka.default-interval", "100ms")
		listeners = append(listeners, listenlog.Kafka)
	case "http":
		args = append(args, "-http.listen", AnyPort)
		listeners = append(listeners, listenlog.HTTP)
	case "small", "large":
	default:
		return "", fmt.Errorf("bench: unknown scenario %q (small, large, http, uds, kafka)", cfg.Scenario)
	}
	args = append(args, cfg.GateArgs...)
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return "", err
	}
	gate, err := StartProc("otlpgate", cfg.Gate, args, nil, filepath.Join(os.TempDir(), "otlpbench-profile-otlpgate.log"))
	if err != nil {
		return "", err
	}
	defer gate.Stop()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	addrs, err := gate.Listening(wctx, listeners...)
	cancel()
	if err != nil {
		return "", err
	}
	listen, pprofAddr := addrs[0], addrs[1]
	var kafkaAddr, httpAddr string
	switch cfg.Scenario {
	case "kafka":
		kafkaAddr = addrs[2]
	case "http":
		httpAddr = addrs[2]
	}

	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadDone := make(chan string, 1)
	switch cfg.Scenario {
	case "small", "large":
		shape := otlpgen.Small
		if cfg.Scenario == "large" {
			shape = otlpgen.Large
		}
		go func() {
			n := 0
			start := time.Now()
			for lctx.Err() == nil {
				r, _ := RunLoad(lctx, LoadConfig{Target: listen, Protocol: "otep", Shape: shape, Batches: 2000, InFlight: 64, Seed: uint64(n)})
				n += r.Acked
			}
			loadDone <- fmt.Sprintf("OTEP stream, %s batches (%d spans x %d attributes), 64 in flight, closed loop: %d batches in %v",
				cfg.Scenario, shape.Spans, shape.Attrs, n, time.Since(start).Round(time.Second))
		}()
	case "http":
		go func() {
			n := 0
			start := time.Now()
			for lctx.Err() == nil {
				r, _ := RunLoad(lctx, LoadConfig{Target: httpAddr, Protocol: "http-proto", Shape: otlpgen.Small, Batches: 2000, InFlight: 64, Seed: uint64(n)})
				n += r.Acked
			}
			loadDone <- fmt.Sprintf("OTLP/HTTP protobuf, small batches (%d spans x %d attributes), 64 connections, closed loop: %d batches in %v",
				otlpgen.Small.Spans, otlpgen.Small.Attrs, n, time.Since(start).Round(time.Second))
		}()
	case "uds":
		caps, err := ReadCaptures(filepath.Join(cfg.Repo, "server/uds/testdata"), "stats_basic.bin", "trace_export.bin", "web_3_requests.bin")
		if err != nil {
			return "", err
		}
		go func() {
			start := time.Now()
			n, err := UDSLoad(lctx, sock, caps, 8)
			loadDone <- fmt.Sprintf("8 unix-socket connections replaying stats_basic, trace_export and web_3_requests: %d replays in %v (%v)",
				n, time.Since(start).Round(time.Second), err)
		}()
	case "kafka":
		metrics, err := os.ReadFile(filepath.Join(cfg.Repo, "server/kafka/testdata/kip714/producer-none-push01-none.metricsdata.pb"))
		if err != nil {
			return "", err
		}
		go func() {
			start := time.Now()
			n, err := KafkaLoad(lctx, kafkaAddr, metrics, 20, 1000)
			loadDone <- fmt.Sprintf("1000 KIP-714 client instances on 20 connections pushing every 100 ms: %d pushes in %v (%v)",
				n, time.Since(start).Round(time.Second), err)
		}()
	}

	time.Sleep(2 * time.Second) // warm up
	commit := gitCommit(cfg.Repo)
	base := filepath.Join(cfg.Out, fmt.Sprintf("%s-%s-%s", time.Now().UTC().Format("20060102-150405"), cfg.Scenario, commit))
	url := "http://" + pprofAddr + "/debug/pprof/"
	fmt.Fprintf(progress, "capturing %ds of CPU profile under load\n", cfg.Seconds)
	if err := Fetch(fmt.Sprintf("%sprofile?seconds=%d", url, cfg.Seconds), base+".cpu.pprof"); err != nil {
		return "", err
	}
	if err := Fetch(url+"allocs", base+".allocs.pprof"); err != nil {
		return "", err
	}
	if err := Fetch(url+"heap", base+".heap.pprof"); err != nil {
		return "", err
	}
	cpu, _ := ProcUsage(gate.Pid())
	rss, _ := PeakRSS(gate.Pid())
	stopLoad()
	load := <-loadDone
	_, spans, _ := sink.Counts()
	note := fmt.Sprintf("command: %s\ncommit: %s\nmachine: %s\nscenario: %s\nload: %s\nsink received: %d items\notlpgate CPU (whole run): %v, peak RSS %d MiB\nfiles: %s.{cpu,allocs,heap}.pprof\n",
		cfg.Command, commit, machine(), cfg.Scenario, load, spans, cpu.Total().Round(time.Millisecond), rss>>20, filepath.Base(base))
	if err := os.WriteFile(base+".txt", []byte(note), 0o644); err != nil {
		return "", err
	}
	return base, nil
}

func gitCommit(repo string) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// machine describes this machine: CPU model, CPUs, memory, Go.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if l, _, ok := strings.Cut(string(b), "\n"); ok {
			mem = ", " + strings.Join(strings.Fields(l)[1:], " ") + " memory"
		}
	}
	return fmt.Sprintf("%s, %d CPUs%s, %s %s/%s", model, runtime.NumCPU(), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
