package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// ProcessingConfig is an `otlpbench processing` run: the cost of otlpgate's processing steps
// (issue 23: -resource.set and tenants), as the CPU per forwarded span of otlpgate run with
// ProcArgs against the same otlpgate run with PlainArgs, under the same load.
type ProcessingConfig struct {
	Gate      string
	PlainArgs []string // otlpgate's flags of the plain runs
	ProcArgs  []string // otlpgate's flags of the processing runs (PlainArgs are not added)
	Intakes   []string // grpc, http-proto, http-json
	Shapes    []ProcessingShape
	InFlight  int
	// Rounds is how many times each row runs plain and processed, alternately: plain first in
	// even rounds, processed first in odd ones, so that a drift of the machine's load over a row
	// weighs on both alike.
	Rounds int
	// Header and HeaderValues go with every load request of both runs (LoadConfig.Header), so
	// that the two see the same bytes; the processed run reads them as tenants.
	Header       string
	HeaderValues []string
	Dir          string // the children's logs
}

// ProcessingShape is a batch shape and how many batches a measured run sends of it.
type ProcessingShape struct {
	Name    string
	Shape   otlpgen.Shape
	Batches int
}

// ProcessingRow is one intake and shape: the CPU per span of each round, plain and processed.
type ProcessingRow struct {
	Intake, Shape string
	Plain, Proc   []float64 // CPU-µs per span, one per round
	// PlainOut and ProcOut are otlpgate's upstream requests per intake request, one per round:
	// tenants split batches (a batch holds one tenant's requests), which shows here.
	PlainOut, ProcOut []float64
	Load              float64 // 1-minute load average at the end of the row
}

// Ratio is the processed run's median CPU per span over the plain run's.
func (r ProcessingRow) Ratio() float64 {
	if p := median(r.Plain); p > 0 {
		return median(r.Proc) / p
	}
	return 0
}

// RunProcessing measures every intake and shape of cfg, Rounds times each way.
func RunProcessing(ctx context.Context, cfg ProcessingConfig, progress io.Writer) ([]ProcessingRow, error) {
	var rows []ProcessingRow
	for _, intake := range cfg.Intakes {
		for _, sh := range cfg.Shapes {
			row := ProcessingRow{Intake: intake, Shape: sh.Name}
			for round := range cfg.Rounds {
				order := []bool{false, true} // processed?
				if round%2 == 1 {
					order = []bool{true, false}
				}
				for _, proc := range order {
					args := cfg.PlainArgs
					if proc {
						args = cfg.ProcArgs
					}
					fmt.Fprintf(progress, "%s %s round %d, processed %v: otlpgate %v\n", intake, sh.Name, round+1, proc, args)
					var rs []ProxyResult
					var err error
					// Another process on the machine may take a port between its choice and
					// otlpgate's bind: such a run is started again, twice at most.
					for try := 0; try < 3 && ctx.Err() == nil; try++ {
						rs, err = RunProxy(ctx, ProxyConfig{Gate: cfg.Gate, GateArgs: args, Intake: intake, Shape: sh.Shape,
							InFlight: cfg.InFlight, Batches: sh.Batches, Dir: cfg.Dir, Header: cfg.Header, HeaderValues: cfg.HeaderValues,
							NoDirect: true}, io.Discard)
						if err == nil || !strings.Contains(err.Error(), "never listened") {
							break
						}
						fmt.Fprintf(progress, "%s %s: %v; again\n", intake, sh.Name, err)
					}
					if err != nil {
						return rows, fmt.Errorf("%s %s: %w", intake, sh.Name, err)
					}
					if len(rs) != 1 || rs[0].Spans == 0 {
						return rows, fmt.Errorf("%s %s: otlpgate forwarded nothing", intake, sh.Name)
					}
					us := float64(rs[0].CPUPerSpan().Nanoseconds()) / 1e3
					out := float64(rs[0].Upstream) / float64(max(rs[0].Received, 1))
					if proc {
						row.Proc, row.ProcOut = append(row.Proc, us), append(row.ProcOut, out)
					} else {
						row.Plain, row.PlainOut = append(row.Plain, us), append(row.PlainOut, out)
					}
				}
			}
			row.Load = loadAverage()
			rows = append(rows, row)
			WriteProcessing(progress, rows[len(rows)-1:])
		}
	}
	return rows, nil
}

// WriteProcessing prints one line per row: the medians of CPU-µs per span plain and processed,
// their ratio, every round's figures, and the load average at the row's end.
func WriteProcessing(w io.Writer, rows []ProcessingRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "intake\tshape\tplain CPU-µs/span\tprocessed\tratio\tplain rounds\tprocessed rounds\tout/in plain\tprocessed\tload\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.3f\t%s\t%s\t%.3f\t%.3f\t%.1f\t\n", r.Intake, r.Shape, median(r.Plain), median(r.Proc), r.Ratio(),
			rounds(r.Plain), rounds(r.Proc), median(r.PlainOut), median(r.ProcOut), r.Load)
	}
	tw.Flush()
}

func rounds(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.3f", x)
	}
	return s
}
