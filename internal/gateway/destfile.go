package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/internal/credfile"
)

var (
	configReloads = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_config_reloads_total",
		Help: "Reloads of -dest.file applied, on SIGHUP or on a change seen by reading it every -dest.file.poll-interval, whether or not a destination changed.",
	})
	configReloadFailures = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_config_reload_failures_total",
		Help: "Reloads of -dest.file refused: the file could not be read or its destinations are invalid (the log says why); the destinations that ran keep running.",
	})
)

// parseDestFile reads a -dest.file: one -dest value a line; blank lines and lines whose first
// non-blank character is # are left out. A # elsewhere belongs to the value (a header may hold
// one). ${env:NAME} and ${file:PATH} are resolved in each line, as in a flag value
// (credfile.Expand): a reload reads the files again, so a changed secret replaces the
// destination that uses it.
func parseDestFile(body []byte) ([]string, error) {
	var specs []string
	n := 0
	for line := range strings.SplitSeq(string(body), "\n") {
		n++
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		spec, err := credfile.Expand(line, os.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if _, err := client.SplitDest(spec); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// fileState is what reading DestFile gave: its content, or why it could not be read.
type fileState struct {
	body []byte
	err  string
}

func readState(path string) fileState {
	body, err := os.ReadFile(path)
	if err != nil {
		return fileState{err: err.Error()}
	}
	return fileState{body: body}
}

func (s fileState) same(o fileState) bool { return s.err == o.err && bytes.Equal(s.body, o.body) }

// reloadDestFile reads DestFile and applies its destinations (applyDests). A file that cannot
// be read or holds an invalid set changes nothing: it is logged and counted in
// otlpgate_config_reload_failures_total. why says what asked for the reload (reload: SIGHUP or
// Reload; changed: the poller saw a change). Without DestFile it reads the -dest flags' files
// again (header-file, bearer-token-file) and applies what changed, uncounted. Safe for
// concurrent use; reloads run one at a time.
func (g *Gateway) reloadDestFile(why string) error {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	if g.dmu.closed {
		return nil
	}
	var st fileState
	if g.cfg.DestFile != "" {
		st = readState(g.cfg.DestFile)
		g.dmu.seen = st
	}
	err := func() error {
		if st.err != "" {
			return errors.New(st.err)
		}
		specs, err := parseDestFile(st.body)
		if err != nil {
			return err
		}
		configs, err := g.cfg.destinations(specs)
		if err != nil {
			return err
		}
		if err := readTokens(configs); err != nil {
			return err
		}
		if g.cfg.DestFile != "" && len(configs)+len(g.cfg.Extra) == 0 {
			return errors.New("no destination")
		}
		if err := g.cfg.checkTenants(configs); err != nil {
			return err
		}
		added, removed, changed, err := g.applyDests(configs)
		if err == nil {
			g.log.Info("destinations reloaded", "file", g.cfg.DestFile, "trigger", why, "added", added, "removed", removed,
				"changed", changed, "destinations", len(g.dmu.members))
		}
		return err
	}()
	if g.cfg.DestFile == "" {
		if err != nil {
			g.log.Error("cannot reload the destinations; the current ones keep running", "trigger", why, "err", err)
		}
		return err
	}
	if err != nil {
		configReloadFailures.Inc()
		g.log.Error("cannot reload the destinations; the current ones keep running", "file", g.cfg.DestFile, "trigger", why, "err", err)
		return fmt.Errorf("-dest.file %s: %w", g.cfg.DestFile, err)
	}
	configReloads.Inc()
	return nil
}

// readTokens reads each destination's bearer-token-file into its configuration, at the start
// and at every reload alike: a rotated token makes the configuration differ from the running
// one, which the reload then replaces, as for a changed header-file. A file that cannot be read
// fails the start, or the reload, which keeps the running destinations; the error names the
// file, never a token.
func readTokens(configs []client.Config) error {
	for i := range configs {
		if err := configs[i].ReadBearerToken(); err != nil {
			return fmt.Errorf("-dest %s: %w", configs[i].Name, err)
		}
	}
	return nil
}

// pollDestFile reads DestFile every DestFilePoll and reloads when what it reads differs from
// what the last read (by either) gave: an invalid file is reported once, not at every poll.
func (g *Gateway) pollDestFile() {
	defer close(g.pollDone)
	t := time.NewTicker(g.cfg.DestFilePoll)
	defer t.Stop()
	for {
		select {
		case <-g.stopPoll:
			return
		case <-t.C:
		}
		st := readState(g.cfg.DestFile)
		g.dmu.Lock()
		changed := !st.same(g.dmu.seen)
		g.dmu.Unlock()
		if changed {
			g.reloadDestFile("changed")
		}
	}
}
