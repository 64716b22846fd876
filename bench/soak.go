package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// SoakSample is one reading of otlpgate's resources during a soak.
type SoakSample struct {
	At         time.Duration
	RSS        int64
	Goroutines float64
	FDs        int
}

// SoakConfig is an `otlpbench soak` run.
type SoakConfig struct {
	Gate     string
	Duration time.Duration
	Every    time.Duration
	Repo     string
}

// RunSoak runs otlpgate under mixed load (a pipelined OTEP stream, v1 unary calls, the
// OpenCensus socket and KIP-714 pushes, each at a steady rate) for cfg.Duration, sampling its
// RSS, goroutines and open descriptors, and returns the samples.
func RunSoak(ctx context.Context, cfg SoakConfig, progress io.Writer) ([]SoakSample, error) {
	sink, err := StartSink("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	sock := filepath.Join(os.TempDir(), fmt.Sprintf("otlpbench-soak-%d.sock", os.Getpid()))
	gate, err := StartProc("otlpgate", cfg.Gate, []string{"-grpc.listen", AnyPort, "-admin.listen", AnyPort, "-http.listen", AnyPort,
		"-uds.listen", sock, "-uds.reporting-period", "1s", "-kafka.listen", AnyPort, "-kafka.default-interval", "1s",
		"-dest", "name=sink,endpoint=" + sink.Addr() + ",protocol=otep,mode=stream,rebalance-timeout=30s"},
		nil, filepath.Join(os.TempDir(), "otlpbench-soak-otlpgate.log"))
	if err != nil {
		return nil, err
	}
	defer gate.Stop()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	addrs, err := gate.Listening(wctx, listenlog.GRPC, listenlog.Admin, listenlog.Kafka)
	cancel()
	if err != nil {
		return nil, err
	}
	listen, admin, kafkaAddr := addrs[0], addrs[1], addrs[2]
	caps, err := ReadCaptures(filepath.Join(cfg.Repo, "server/uds/testdata"), "stats_basic.bin", "trace_export.bin")
	if err != nil {
		return nil, err
	}
	metrics, err := os.ReadFile(filepath.Join(cfg.Repo, "server/kafka/testdata/kip714/producer-none-push01-none.metricsdata.pb"))
	if err != nil {
		return nil, err
	}

	lctx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var wg sync.WaitGroup
	loop := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lctx.Err() == nil {
				f()
			}
		}()
	}
	// Batches of 2000 requests: each round opens a new stream or set of calls, so connection
	// and stream churn is part of the soak.
	loop(func() {
		RunLoad(lctx, LoadConfig{Target: listen, Protocol: "otep", Shape: otlpgen.Small, Batches: 2000, InFlight: 32, Rate: 500})
	})
	loop(func() {
		RunLoad(lctx, LoadConfig{Target: listen, Protocol: "v1", Shape: otlpgen.Large, Batches: 200, InFlight: 4, Rate: 20})
	})
	loop(func() {
		c, cancel := context.WithTimeout(lctx, 5*time.Second) // reconnect every 5 s
		UDSLoad(c, sock, caps, 2)
		cancel()
		time.Sleep(50 * time.Millisecond) // the replay is a tight loop: pace the reconnects
	})
	loop(func() {
		c, cancel := context.WithTimeout(lctx, 20*time.Second)
		KafkaLoad(c, kafkaAddr, metrics, 4, 100)
		cancel()
	})

	var samples []SoakSample
	start := time.Now()
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	sample := func() {
		rss, _ := residentBytes(gate.Pid())
		g, _ := ScrapeCounter("http://"+admin+"/metrics", "go_goroutines")
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", gate.Pid()))
		s := SoakSample{At: time.Since(start).Round(time.Second), RSS: rss, Goroutines: g, FDs: len(fds)}
		samples = append(samples, s)
		_, items, _ := sink.Counts()
		fmt.Fprintf(progress, "%8v  RSS %4d MiB  goroutines %5.0f  fds %4d  items delivered %d\n", s.At, s.RSS>>20, s.Goroutines, s.FDs, items)
	}
	for sample(); lctx.Err() == nil; {
		select {
		case <-lctx.Done():
		case <-t.C:
			sample()
		}
	}
	wg.Wait()
	time.Sleep(cfg.Every) // let connections close before the last reading
	sample()
	return samples, nil
}

// residentBytes is a process's current RSS (VmRSS).
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, err
	}
	var size, res int64
	fmt.Sscan(string(b), &size, &res)
	return res * int64(os.Getpagesize()), nil
}

// WriteSoak reports the growth between the first reading after warm-up (the second sample)
// and the last.
func WriteSoak(w io.Writer, s []SoakSample) {
	if len(s) < 3 {
		fmt.Fprintln(w, "too few samples")
		return
	}
	a, z := s[1], s[len(s)-1]
	fmt.Fprintf(w, "\nfrom %v to %v (the last after the load stopped):\n", a.At, z.At)
	fmt.Fprintf(w, "  RSS         %d -> %d MiB (%+d MiB)\n", a.RSS>>20, z.RSS>>20, (z.RSS-a.RSS)>>20)
	fmt.Fprintf(w, "  goroutines  %.0f -> %.0f (%+.0f)\n", a.Goroutines, z.Goroutines, z.Goroutines-a.Goroutines)
	fmt.Fprintf(w, "  descriptors %d -> %d (%+d)\n", a.FDs, z.FDs, z.FDs-a.FDs)
}
