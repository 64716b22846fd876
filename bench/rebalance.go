package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/otlpgate/otlpgate/internal/l7lb"
	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// RebalanceConfig is one run of the re-balancing scenario: load -> otlpgate edge -> L7 balancer
// -> gateways (counting sinks), with a gateway added to the balancer mid-run.
type RebalanceConfig struct {
	Gate      string        // otlpgate binary, run as the edge
	Balancer  string        // nginx or haproxy
	DeployDir string        // deploy/, whose balancer configuration is run
	Gateways  int           // gateways behind the balancer at the start
	AddAt     time.Duration // when one more gateway joins (0: never)
	Duration  time.Duration // length of the load
	Rebalance time.Duration // the edge destination's rebalance-timeout (0: off)
	Streams   int           // the edge destination's streams
	Rate      float64       // batches per second
	Shape     otlpgen.Shape
	Sample    time.Duration // width of one point of the series
	Dir       string        // logs and the balancer's files
}

// RebalanceSample is one interval: the requests each gateway received in it.
type RebalanceSample struct {
	At       time.Duration `json:"at"`
	Requests []int64       `json:"requests"`
}

// RebalanceResult is the run's series and settings.
type RebalanceResult struct {
	Balancer  string            `json:"balancer"`
	Rebalance time.Duration     `json:"rebalance"`
	Streams   int               `json:"streams"`
	AddAt     time.Duration     `json:"add_at"`
	Samples   []RebalanceSample `json:"samples"`
	// AckedSpans is what the edge acknowledged to the load; ReceivedSpans what the gateways got.
	AckedSpans    int64 `json:"acked_spans"`
	ReceivedSpans int64 `json:"received_spans"`
}

// RunRebalance runs the scenario and returns the requests per gateway over time.
func RunRebalance(ctx context.Context, cfg RebalanceConfig, progress io.Writer) (RebalanceResult, error) {
	res := RebalanceResult{Balancer: cfg.Balancer, Rebalance: cfg.Rebalance, Streams: cfg.Streams, AddAt: cfg.AddAt}
	total := cfg.Gateways
	if cfg.AddAt > 0 {
		total++
	}
	sinks := make([]*Sink, total)
	addrs := make([]string, total)
	for i := range sinks {
		s, err := StartSink("127.0.0.1:0")
		if err != nil {
			return res, err
		}
		defer s.Close()
		sinks[i], addrs[i] = s, s.Addr()
	}
	lbDir := filepath.Join(cfg.Dir, "otlpbench-"+cfg.Balancer)
	if err := os.MkdirAll(lbDir, 0o755); err != nil {
		return res, err
	}
	start := l7lb.StartNginx
	if cfg.Balancer == "haproxy" {
		start = l7lb.StartHAProxy
	} else if cfg.Balancer != "nginx" {
		return res, fmt.Errorf("bench: unknown balancer %q (want nginx or haproxy)", cfg.Balancer)
	}
	lb, err := start(cfg.DeployDir, lbDir, addrs[:cfg.Gateways], l7lb.Options{})
	if err != nil {
		return res, err
	}
	defer lb.Stop()

	dest := fmt.Sprintf("name=gateways,endpoint=%s,protocol=otep,mode=stream,streams=%d,rebalance-timeout=%s,rebalance-requests=0",
		lb.Addr(), cfg.Streams, cfg.Rebalance)
	edge, err := StartProc("otlpgate", cfg.Gate, []string{"-grpc.listen=" + AnyPort, "-admin.listen=" + AnyPort, "-http.listen=" + AnyPort, "-uds.listen=",
		"-dest=" + dest}, nil, filepath.Join(cfg.Dir, "otlpbench-rebalance-edge.log"))
	if err != nil {
		return res, err
	}
	defer edge.Stop()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	edgeAddrs, err := edge.Listening(wctx, listenlog.GRPC)
	cancel()
	if err != nil {
		return res, err
	}
	listen := edgeAddrs[0]

	batches := int(cfg.Rate * cfg.Duration.Seconds())
	loadDone := make(chan LoadResult, 1)
	loadErr := make(chan error, 1)
	began := time.Now()
	go func() {
		r, err := RunLoad(ctx, LoadConfig{Target: listen, Protocol: "otep", Shape: cfg.Shape, Batches: batches,
			InFlight: 64, Rate: cfg.Rate, Seed: 1})
		loadDone <- r
		loadErr <- err
	}()
	t := time.NewTicker(cfg.Sample)
	defer t.Stop()
	last := make([]int64, total)
	added := cfg.AddAt == 0
	for running := true; running; {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case r := <-loadDone:
			res.AckedSpans = int64(r.Acked) * int64(cfg.Shape.Spans)
			if err := <-loadErr; err != nil {
				return res, err
			}
			running = false
		case now := <-t.C:
			el := now.Sub(began)
			if !added && el >= cfg.AddAt {
				if err := lb.SetBackends(addrs); err != nil {
					return res, err
				}
				added = true
				fmt.Fprintf(progress, "%6.1fs  gateway %d added to %s\n", el.Seconds(), total, cfg.Balancer)
			}
			s := RebalanceSample{At: el, Requests: make([]int64, total)}
			for i, sk := range sinks {
				b, _, _ := sk.Counts()
				s.Requests[i], last[i] = b-last[i], b
			}
			res.Samples = append(res.Samples, s)
			fmt.Fprintf(progress, "%6.1fs  %v\n", el.Seconds(), s.Requests)
		}
	}
	// The edge may still be delivering what it acknowledged last.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res.ReceivedSpans = 0
		for _, sk := range sinks {
			_, spans, _ := sk.Counts()
			res.ReceivedSpans += spans
		}
		if res.ReceivedSpans >= res.AckedSpans || time.Now().After(deadline) {
			return res, nil
		}
	}
}

// WriteRebalance writes the result as JSON.
func WriteRebalance(path string, r RebalanceResult) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ChartRebalance draws each gateway's share of the requests over time, a line per gateway, with
// the moment a gateway joined marked, and saves it to every path (.png, .svg).
func ChartRebalance(r RebalanceResult, paths ...string) error {
	if len(r.Samples) == 0 {
		return fmt.Errorf("bench: no samples to chart")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Share of requests per gateway through %s (rebalance every %v, %d streams)", r.Balancer, r.Rebalance, r.Streams)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "share of requests (%)"
	p.Y.Min, p.Y.Max = 0, 100
	p.Add(plotter.NewGrid())
	n := len(r.Samples[0].Requests)
	for g := range n {
		xys := make(plotter.XYs, 0, len(r.Samples))
		for _, s := range r.Samples {
			var sum int64
			for _, v := range s.Requests {
				sum += v
			}
			share := 0.0
			if sum > 0 {
				share = 100 * float64(s.Requests[g]) / float64(sum)
			}
			xys = append(xys, plotter.XY{X: s.At.Seconds(), Y: share})
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		c := plotutil.Color(g)
		if c == nil {
			c = color.Black
		}
		line.Color = c
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("gateway %d", g+1), line)
	}
	if r.AddAt > 0 {
		mark, err := plotter.NewLine(plotter.XYs{{X: r.AddAt.Seconds(), Y: 0}, {X: r.AddAt.Seconds(), Y: 100}})
		if err != nil {
			return err
		}
		mark.Color = color.Gray{Y: 100}
		mark.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(mark)
		p.Legend.Add(fmt.Sprintf("gateway %d added", n), mark)
	}
	p.Legend.Top = true
	for _, path := range paths {
		if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
			return fmt.Errorf("bench: cannot save chart %s: %w", path, err)
		}
	}
	return nil
}
