package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fsyncWatch polls otlpgate's otlpgate_spool_fsyncs_total while the benchmark runs: the rate
// is taken between the first and the last change seen, the time the spool was appended to.
type fsyncWatch struct {
	mu          sync.Mutex
	first, last float64
	t0, t1      time.Time
	seen        bool
}

func watchFsyncs(ctx context.Context, admin string) *fsyncWatch {
	w := &fsyncWatch{}
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				v, ok := readCounter(admin, "otlpgate_spool_fsyncs_total")
				if !ok {
					continue
				}
				w.mu.Lock()
				switch {
				case !w.seen:
					w.seen, w.first, w.last, w.t0, w.t1 = true, v, v, now, now
				case v != w.last:
					if w.last == w.first {
						w.t0 = now.Add(-250 * time.Millisecond)
					}
					w.last, w.t1 = v, now
				}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// result returns the fsyncs seen and their rate per second.
func (w *fsyncWatch) result() (float64, float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.t1.Sub(w.t0).Seconds()
	if d <= 0 {
		return w.last, 0
	}
	return w.last, (w.last - w.first) / d
}

// readCounter reads one unlabelled sample from a /metrics page.
func readCounter(admin, name string) (float64, bool) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}
