package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// intakeNames are the intakes as the tables name them.
var intakeNames = map[string]string{"grpc": "OTLP/gRPC", "http": "OTLP/HTTP"}

// WriteSweep prints the run as Markdown: idle CPU of each proxy, then per batch shape a row per
// intake and rate with each proxy's CPU-µs per span (a peer's with its ratio to otlpgate's),
// the client's latency p50 / p99 and each proxy's peak RSS.
func WriteSweep(w io.Writer, r *SweepResult) {
	cfg := r.Config
	out := "otlpgate sends to the sink over OTLP/gRPC unary v1"
	if cfg.Out == "http" {
		out = "otlpgate sends to the sink over OTLP/HTTP protobuf"
	}
	fmt.Fprintf(w, "sweep: each rate an open loop (closed: %d requests in flight back to back) for %v after %v warm-up, at most %d requests in flight; "+
		"a fresh proxy per cell, unpinned, its GOMAXPROCS the runtime's; %s, the Collector as its configuration says; "+
		"CPU is user+system time of the proxy process per span the sink received; latency is the client's, from when a request was due to its answer\n",
		cfg.MaxInFlight, cfg.Duration, cfg.Warmup, cfg.MaxInFlight, out)
	for _, f := range cfg.Floors {
		how := "splice(2), the bytes never enter the process"
		if f == AnchorRelayCopy {
			how = fmt.Sprintf("each byte read into a %d KiB buffer and written out", RelayCopyBuffer>>10)
		}
		fmt.Fprintf(w, "floor: %s, a TCP relay from the load to the sink (%s) on the same load: no proxy that forwards these requests one by one costs less at that rate\n", f, how)
	}
	if len(r.Idle) > 0 {
		fmt.Fprintf(w, "\n| idle, no traffic, %v | CPU | share of a core | wake-ups/s | threads | peak RSS MiB |\n| --- | --- | --- | --- | --- | --- |\n", cfg.Idle)
		for _, i := range r.Idle {
			if i.Err != "" {
				fmt.Fprintf(w, "| %s | - | - | - | - | - |\n", i.Target)
				continue
			}
			fmt.Fprintf(w, "| %s | %.1f ms | %.3f%% | %.1f | %d | %d |\n", i.Target, float64(i.CPU)/1e6, 100*i.Share(),
				float64(i.Wakeups)/i.Wall.Seconds(), i.Threads, i.RSS>>20)
		}
	}
	for _, sh := range cfg.Shapes {
		fmt.Fprintf(w, "\n%s batches (%d spans a request)\n\n", sh.Name, sh.Shape.Spans)
		fmt.Fprintf(w, "| intake | spans/s |")
		for i, t := range r.Targets {
			if i == 0 {
				fmt.Fprintf(w, " %s CPU-µs/span |", t)
			} else {
				fmt.Fprintf(w, " %s (x otlpgate) |", t)
			}
		}
		for _, t := range r.Targets {
			fmt.Fprintf(w, " %s p50 / p99 ms |", t)
		}
		fmt.Fprintf(w, " peak RSS MiB (%s) |\n", strings.Join(r.Targets, " / "))
		fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", 3+2*len(r.Targets)))
		for _, in := range cfg.Intakes {
			for _, rate := range cfg.Rates {
				fmt.Fprintf(w, "| %s | %s |", intakeNames[in], FormatRate(rate))
				gate := r.Cell(AnchorGate, sh.Name, in, rate)
				for _, t := range r.Targets {
					fmt.Fprintf(w, " %s |", sweepCPU(r.Cell(t, sh.Name, in, rate), gate))
				}
				for _, t := range r.Targets {
					c := r.Cell(t, sh.Name, in, rate)
					if c == nil || c.Err != "" || c.Spans == 0 {
						fmt.Fprintf(w, " - |")
						continue
					}
					fmt.Fprintf(w, " %s / %s |", ms(c.P50), ms(c.P99))
				}
				var rss []string
				for _, t := range r.Targets {
					c := r.Cell(t, sh.Name, in, rate)
					if c == nil || c.PeakRSS == 0 {
						rss = append(rss, "-")
						continue
					}
					rss = append(rss, fmt.Sprint(c.PeakRSS>>20))
				}
				fmt.Fprintf(w, " %s |\n", strings.Join(rss, " / "))
			}
		}
	}
	for _, c := range r.Cells {
		name := fmt.Sprintf("%s %s %s %s", c.Target, c.Shape, c.Intake, FormatRate(c.Rate))
		if c.Err != "" {
			fmt.Fprintf(w, "\n%s: %s\n", name, c.Err)
		}
		if c.Failed > 0 {
			fmt.Fprintf(w, "\n%s: %d of %d requests failed\n", name, c.Failed, c.Sent)
		}
		if c.Late > 0 {
			fmt.Fprintf(w, "\n%s: %d of %d requests sent late (%d in flight unanswered when they were due: the run fell behind the rate)\n",
				name, c.Late, c.Sent, cfg.MaxInFlight)
		}
	}
	for _, i := range r.Idle {
		if i.Err != "" {
			fmt.Fprintf(w, "\nidle %s: %s\n", i.Target, i.Err)
		}
	}
}

// sweepCPU is a cell's CPU-µs per span, with its ratio to otlpgate's for a peer, and the rate
// delivered for the closed loop.
func sweepCPU(c, gate *SweepCell) string {
	if c == nil || c.CPUPerSpan() == 0 {
		return "-"
	}
	s := fmt.Sprintf("%.2f", c.CPUPerSpan())
	var notes []string
	if gate != nil && gate != c && gate.CPUPerSpan() > 0 {
		notes = append(notes, fmt.Sprintf("%.1fx", c.CPUPerSpan()/gate.CPUPerSpan()))
	}
	if c.Rate == 0 {
		notes = append(notes, FormatRate(float64(int64(c.Delivered()/100))*100)+"/s")
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// SweepChart draws each proxy's CPU-µs per span against the spans per second it delivered, a
// line per proxy and intake, for one batch shape, and saves it to every path given.
func SweepChart(r *SweepResult, shape string, paths ...string) error {
	var lines chartLines
	for _, c := range r.Cells {
		if c.Shape != shape || c.CPUPerSpan() == 0 || c.Delivered() == 0 {
			continue
		}
		lines.add(c.Target+" "+intakeNames[c.Intake], c.Delivered(), c.CPUPerSpan())
	}
	if len(lines.names) == 0 {
		return fmt.Errorf("bench: no %s cells to chart", shape)
	}
	return logLogChart(fmt.Sprintf("CPU per span against rate, %s batches", shape),
		"spans / second delivered (log scale)", "CPU-µs / span (log scale)", &lines, paths...)
}
