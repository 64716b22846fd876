package admin

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"
)

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"bytes":   humanBytes,
	"rate":    humanRate,
	"pct":     func(a, b float64) string { return pct(a, b) },
	"spark":   spark,
	"ago":     func(t time.Time, now time.Time) string { return humanDur(now.Sub(t)) },
	"lat":     humanLatency,
	"reasons": reasons,
	"mul1000": func(v float64) float64 { return math.Round(v * 1000) },
	"deref":   func(v *float64) float64 { return *v },
}).Parse(pageHTML))

// page serves the status page: server-rendered, then refreshed from /status.json by the
// script at its end.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	now := time.Now()
	s.refresh(now)
	st := s.sampler.status(now)
	s.fillReady(&st)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page loads nothing from elsewhere: its style and script are inline.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	if err := pageTmpl.Execute(w, struct {
		Status
		Now time.Time
	}{st, now}); err != nil {
		s.log.Debug("status page", "err", err)
	}
}

func (s *Server) statusJSON(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	s.refresh(now)
	st := s.sampler.status(now)
	s.fillReady(&st)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(st)
}

func (s *Server) fillReady(st *Status) {
	if err := s.readyErr(); err != nil {
		st.NotReady = err.Error()
	} else {
		st.Ready = true
	}
}

func humanBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", v)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

func humanRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM/s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk/s", v/1e3)
	case v >= 10 || v == 0:
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.2f/s", v)
}

func humanLatency(v float64) string {
	switch {
	case v == 0:
		return "–"
	case v < 1e-3:
		return fmt.Sprintf("%.0f µs", v*1e6)
	case v < 1:
		return fmt.Sprintf("%.1f ms", v*1e3)
	}
	return fmt.Sprintf("%.2f s", v)
}

func humanDur(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func pct(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

// reasons lists the non-zero counts of a by-reason map, largest first: "rejected 40, ack_timeout 2".
func reasons(m map[string]float64) string {
	type kv struct {
		k string
		v float64
	}
	var l []kv
	for k, v := range m {
		if v > 0 {
			l = append(l, kv{k, v})
		}
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v || (l[i].v == l[j].v && l[i].k < l[j].k) })
	var parts []string
	for _, e := range l {
		parts = append(parts, fmt.Sprintf("%s %.0f", e.k, e.v))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// spark draws h as the points of an SVG polyline 120 wide and 24 high.
func spark(h []float64) string {
	if len(h) < 2 {
		return ""
	}
	top := 0.0
	for _, v := range h {
		top = math.Max(top, v)
	}
	var b strings.Builder
	for i, v := range h {
		y := 23.0
		if top > 0 {
			y = 23 - 22*v/top
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", 120*float64(i)/float64(len(h)-1), y)
	}
	return strings.TrimSpace(b.String())
}
