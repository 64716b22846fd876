package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"
)

// Row is one line of the appendix: a mode at a latency and batch shape.
type Row struct {
	Mode    string        `json:"mode"`
	RTT     time.Duration `json:"rtt_ns"`
	Shape   string        `json:"shape"` // "small" or "large"
	Batches int           `json:"batches"`
	Spans   int           `json:"spans"`
	CPU     time.Duration `json:"cpu_ns"`  // user + system time of the measuring process
	Wall    time.Duration `json:"wall_ns"` // from the first send to the last acknowledgement
	Errors  int           `json:"errors"`  // batches not acknowledged with success
}

// BatchesPerCPUSec is the throughput per second of CPU time.
func (r Row) BatchesPerCPUSec() float64 { return perSec(r.Batches, r.CPU) }

// BatchesPerWallSec is the throughput per second of elapsed time.
func (r Row) BatchesPerWallSec() float64 { return perSec(r.Batches, r.Wall) }

// SteadyPerWallSec is the throughput once the pipe is full: batches over the wall time less one
// round trip, which the first answer costs whatever the mode. At long round trips and a few
// hundred batches that first round trip alone caps BatchesPerWallSec. 0 when the run took no
// longer than one round trip.
func (r Row) SteadyPerWallSec() float64 {
	if r.Wall <= r.RTT {
		return 0
	}
	return perSec(r.Batches, r.Wall-r.RTT)
}

func perSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// FormatRTT prints a latency as the appendix does: in milliseconds.
func FormatRTT(d time.Duration) string {
	return fmt.Sprintf("%g ms", float64(d)/float64(time.Millisecond))
}

// WriteRows prints rows grouped by shape and latency, with the appendix's columns.
// The last column, steady/wallsec, is SteadyPerWallSec.
func WriteRows(w io.Writer, rows []Row) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	var group string
	for _, r := range rows {
		if g := r.Shape + "/" + FormatRTT(r.RTT); g != group {
			group = g
			fmt.Fprintf(tw, "\n%s batches, %s RTT\t\t\t\t\t\t\t\n", r.Shape, FormatRTT(r.RTT))
			fmt.Fprintf(tw, "mode\tspans\tCPU time\twall time\tbatches/cpusec\tbatches/wallsec\terrors\tsteady/wallsec\t\n")
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2fs\t%.2fs\t%.0f\t%.0f\t%d\t%.0f\t\n", r.Mode, r.Spans, r.CPU.Seconds(), r.Wall.Seconds(),
			r.BatchesPerCPUSec(), r.BatchesPerWallSec(), r.Errors, r.SteadyPerWallSec())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeTrimmed(w, buf.Bytes())
}

// writeTrimmed writes a table with the padding tabwriter leaves at the ends of lines removed, so
// that the output diffs and pipes cleanly.
func writeTrimmed(w io.Writer, table []byte) error {
	var out bytes.Buffer
	for line := range bytes.Lines(table) {
		out.Write(bytes.TrimRight(line, " \t\n"))
		if bytes.HasSuffix(line, []byte("\n")) {
			out.WriteByte('\n')
		}
	}
	_, err := w.Write(out.Bytes())
	return err
}

// Factor is the throughput of one mode divided by the unary baseline at the same latency and
// shape, the appendix's "Streaming/Unary" table.
type Factor struct {
	Mode   string        `json:"mode"`
	Shape  string        `json:"shape"`
	RTT    time.Duration `json:"rtt_ns"`
	Factor float64       `json:"factor"`
}

// Factors computes the throughput factor of every non-baseline row against the row of mode
// baseline at the same shape and latency.
func Factors(rows []Row, baseline string) []Factor {
	type key struct {
		shape string
		rtt   time.Duration
	}
	base := map[key]float64{}
	for _, r := range rows {
		if r.Mode == baseline {
			base[key{r.Shape, r.RTT}] = r.BatchesPerWallSec()
		}
	}
	var out []Factor
	for _, r := range rows {
		b := base[key{r.Shape, r.RTT}]
		if r.Mode == baseline || b == 0 {
			continue
		}
		out = append(out, Factor{r.Mode, r.Shape, r.RTT, r.BatchesPerWallSec() / b})
	}
	return out
}

// WriteFactors prints the factor table: a line per mode and shape, a column per latency.
func WriteFactors(w io.Writer, fs []Factor, baseline string) error {
	var rtts []time.Duration
	seen := map[time.Duration]bool{}
	type key struct{ mode, shape string }
	var order []key
	cells := map[key]map[time.Duration]float64{}
	for _, f := range fs {
		if !seen[f.RTT] {
			seen[f.RTT] = true
			rtts = append(rtts, f.RTT)
		}
		k := key{f.Mode, f.Shape}
		if cells[k] == nil {
			cells[k] = map[time.Duration]float64{}
			order = append(order, k)
		}
		cells[k][f.RTT] = f.Factor
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\nthroughput factor vs %s (batches/wallsec)\t\t", baseline)
	for _, r := range rtts {
		fmt.Fprintf(tw, "%s\t", FormatRTT(r))
	}
	fmt.Fprintln(tw)
	for _, k := range order {
		fmt.Fprintf(tw, "%s\t%s\t", k.mode, k.shape)
		for _, r := range rtts {
			if v, ok := cells[k][r]; ok {
				fmt.Fprintf(tw, "%.2f\t", v)
			} else {
				fmt.Fprintf(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeTrimmed(w, buf.Bytes())
}

// Report is what -json writes.
type Report struct {
	Started time.Time `json:"started"`
	Command string    `json:"command"`
	Machine string    `json:"machine"`
	Rows    []Row     `json:"rows"`
	Factors []Factor  `json:"factors"`
}

// WriteJSON writes r to path.
func WriteJSON(path string, r Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
