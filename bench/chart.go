package bench

import (
	"fmt"
	"image/color"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Chart draws batches/wallsec against round-trip latency, a line per mode, for one batch shape,
// and saves it to every path given (the extension picks the format: .png, .svg).
func Chart(rows []Row, shape string, paths ...string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("otlpgate Appendix B, %s batches", shape)
	p.X.Label.Text = "round-trip latency (ms, log scale)"
	p.Y.Label.Text = "batches / wall second (log scale)"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = false
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	byMode := map[string]plotter.XYs{}
	var modes []string
	for _, r := range rows {
		if r.Shape != shape || r.BatchesPerWallSec() <= 0 {
			continue
		}
		if _, ok := byMode[r.Mode]; !ok {
			modes = append(modes, r.Mode)
		}
		byMode[r.Mode] = append(byMode[r.Mode], plotter.XY{X: float64(r.RTT) / float64(time.Millisecond), Y: r.BatchesPerWallSec()})
	}
	if len(modes) == 0 {
		return fmt.Errorf("bench: no %s rows to chart", shape)
	}
	for i, m := range modes {
		xys := byMode[m]
		sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		if c == nil {
			c = color.Black
		}
		line.Color, points.Color = c, c
		line.Dashes = plotutil.Dashes(i / 7)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(m, line, points)
	}
	for _, path := range paths {
		if err := p.Save(9*vg.Inch, 6*vg.Inch, path); err != nil {
			return fmt.Errorf("bench: cannot save chart %s: %w", path, err)
		}
	}
	return nil
}
