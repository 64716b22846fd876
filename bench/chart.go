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
	var lines chartLines
	for _, r := range rows {
		if r.Shape != shape || r.BatchesPerWallSec() <= 0 {
			continue
		}
		lines.add(r.Mode, float64(r.RTT)/float64(time.Millisecond), r.BatchesPerWallSec())
	}
	if len(lines.names) == 0 {
		return fmt.Errorf("bench: no %s rows to chart", shape)
	}
	return logLogChart(fmt.Sprintf("otlpgate Appendix B, %s batches", shape),
		"round-trip latency (ms, log scale)", "batches / wall second (log scale)", &lines, paths...)
}

// chartLines are the points of a chart's lines, by name, in the order the names came.
type chartLines struct {
	names []string
	xys   map[string]plotter.XYs
}

func (l *chartLines) add(name string, x, y float64) {
	if l.xys == nil {
		l.xys = map[string]plotter.XYs{}
	}
	if _, ok := l.xys[name]; !ok {
		l.names = append(l.names, name)
	}
	l.xys[name] = append(l.xys[name], plotter.XY{X: x, Y: y})
}

// logLogChart draws lines on log scales, each sorted by x, with its legend at the top left, and
// saves the chart to every path given (the extension picks the format: .png, .svg).
func logLogChart(title, xLabel, yLabel string, lines *chartLines, paths ...string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = false
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for i, name := range lines.names {
		xys := lines.xys[name]
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
		p.Legend.Add(name, line, points)
	}
	for _, path := range paths {
		if err := p.Save(9*vg.Inch, 6*vg.Inch, path); err != nil {
			return fmt.Errorf("bench: cannot save chart %s: %w", path, err)
		}
	}
	return nil
}
