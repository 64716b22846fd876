package admin

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var pprofRefused = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_pprof_refused_total",
	Help: "Profile or trace requests refused because they asked for more than -pprof.max-duration or no valid duration.",
})

// PprofConfig of the profiling listener. It is a listener of its own, off by default, because
// profiles reveal memory contents and a CPU profile costs the process; on the admin listener,
// which serves metrics and probes to the network in the shipped manifests, it would hand both to
// anyone who reaches the port.
type PprofConfig struct {
	// Listen is the loopback address of /debug/pprof/ (-pprof.listen, default empty: off). Only
	// loopback addresses are accepted: reach it from elsewhere with an SSH tunnel or
	// kubectl port-forward.
	Listen string
	// MaxDuration bounds the duration of /debug/pprof/profile and /debug/pprof/trace
	// (-pprof.max-duration, default 60s; otlpgate_pprof_refused_total counts refusals).
	MaxDuration time.Duration
}

// DefaultPprofConfig returns the defaults documented on PprofConfig.
func DefaultPprofConfig() PprofConfig { return PprofConfig{MaxDuration: 60 * time.Second} }

// Validate reports a configuration that cannot work or that would expose profiles beyond the
// host.
func (c PprofConfig) Validate() error {
	if c.Listen == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("pprof: bad listen address %q: %w", c.Listen, err)
	}
	if !isLoopback(host) {
		return fmt.Errorf("pprof: listen address %q is not a loopback address (profiles expose memory contents; use a tunnel)", c.Listen)
	}
	if c.MaxDuration < time.Second {
		return errors.New("pprof: -pprof.max-duration must be at least 1s")
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewPprof returns the profiling server for cfg, or nil when it is off. It serves the runtime's
// profiles except /debug/pprof/cmdline, which would show secrets given as flags.
func NewPprof(cfg PprofConfig, log *slog.Logger) (*Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Listen == "" {
		return nil, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not served: the command line may hold secrets", http.StatusNotFound)
	})
	mux.Handle("/debug/pprof/profile", boundSeconds(cfg.MaxDuration, http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/trace", boundSeconds(cfg.MaxDuration, http.HandlerFunc(pprof.Trace)))
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return newListener("pprof", cfg.Listen, 5*time.Second, cfg.MaxDuration+30*time.Second, mux, log), nil
}

// boundSeconds refuses a profile or trace longer than max, so that one request cannot keep the
// profiler (and a connection) busy for as long as it asks.
func boundSeconds(max time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := r.URL.Query().Get("seconds"); s != "" {
			n, err := strconv.ParseFloat(s, 64)
			if err != nil || n <= 0 || time.Duration(n*float64(time.Second)) > max {
				pprofRefused.Inc()
				http.Error(w, fmt.Sprintf("seconds must be a positive number of at most %v (-pprof.max-duration)", max), http.StatusBadRequest)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
