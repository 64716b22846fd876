package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
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
		Help: "Reloads of -config or -dest.file applied, on SIGHUP or on a change seen by reading the file every -config.poll-interval or -dest.file.poll-interval, whether or not a destination changed.",
	})
	configReloadFailures = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_config_reload_failures_total",
		Help: "Reloads of -config or -dest.file refused: the file could not be read, holds an invalid configuration or invalid destinations (the log says why); the running configuration and destinations keep running.",
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
// again (header-file, bearer-token-file) and applies what changed, uncounted unless counted
// (a config file's reload, ReloadWith). With replace, dests are the -dest values from now on,
// if the whole set is applied. Safe for concurrent use; reloads run one at a time.
func (g *Gateway) reloadDestFile(why string, dests []string, replace, counted bool) error {
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
	c := g.cfg
	if replace {
		c.Dests = dests
	}
	err := func() error {
		if st.err != "" {
			return errors.New(st.err)
		}
		if err := g.checkReplace(c); err != nil {
			return err
		}
		specs, err := parseDestFile(st.body)
		if err != nil {
			return err
		}
		configs, err := c.destinations(specs)
		if err != nil {
			return err
		}
		if err := readTokens(configs); err != nil {
			return err
		}
		if (c.DestFile != "" || replace) && len(configs)+len(c.Extra) == 0 {
			return errors.New("no destination")
		}
		if err := c.checkTenants(configs); err != nil {
			return err
		}
		if _, err := c.router(configs); err != nil {
			return err
		}
		added, removed, changed, err := g.applyDests(configs)
		if err == nil {
			g.cfg.Dests = c.Dests
			g.log.Info("destinations reloaded", "file", g.cfg.DestFile, "trigger", why, "added", added, "removed", removed,
				"changed", changed, "destinations", len(g.dmu.members))
		}
		return err
	}()
	counted = counted || g.cfg.DestFile != ""
	switch {
	case err != nil && !counted:
		g.log.Error("cannot reload the destinations; the current ones keep running", "trigger", why, "err", err)
		return err
	case err != nil && g.cfg.DestFile == "":
		configReloadFailures.Inc()
		g.log.Error("cannot reload the destinations; the current ones keep running", "trigger", why, "err", err)
		return err
	case err != nil:
		configReloadFailures.Inc()
		g.log.Error("cannot reload the destinations; the current ones keep running", "file", g.cfg.DestFile, "trigger", why, "err", err)
		return fmt.Errorf("-dest.file %s: %w", g.cfg.DestFile, err)
	case counted:
		configReloads.Inc()
	}
	return nil
}

// checkReplace refuses next's -dest values where they differ from the running ones in a way a
// reload cannot apply. Called with g.dmu held.
func (g *Gateway) checkReplace(next Config) error {
	if slices.Equal(next.Dests, g.cfg.Dests) {
		return nil
	}
	if len(g.cfg.Dests)+len(g.cfg.Destinations)+len(g.cfg.Extra) == 0 && g.cfg.DestFile == "" {
		return errors.New("otlpgate started without a destination and writes the local file (-file.path): giving it destinations takes a restart")
	}
	// What runs is not parsed again: a file its -dest values name (a header-file) may be
	// gone by now, moved to the path next names. Routes by resource attribute are checked with
	// the destinations they number, once DestFile is read too (reloadDestFile).
	return nil
}

// ReloadFailed counts a reload refused before it reached the gateway, in
// otlpgate_config_reload_failures_total: a config file that cannot be read or holds an
// invalid configuration. Safe for concurrent use.
func ReloadFailed() { configReloadFailures.Inc() }

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
	g.pollFile(g.cfg.DestFile, g.cfg.DestFilePoll, func() fileState {
		g.dmu.Lock()
		defer g.dmu.Unlock()
		return g.dmu.seen
	}, func(fileState) { g.reloadDestFile("changed", nil, false, false) })
}

// Watch reads the file at path every interval, from a goroutine of its own until Shutdown, and
// calls changed, from that goroutine, when what it reads (the content, or why it cannot be
// read) differs from the previous reading; body is what the caller read at the start. It is
// how -dest.file is watched, for a file the caller reads itself (the config file). Call it
// after Start.
func (g *Gateway) Watch(path string, interval time.Duration, body []byte, changed func()) {
	last := fileState{body: body} // only the poller's goroutine reads and writes it
	g.pollFile(path, interval, func() fileState { return last }, func(st fileState) {
		last = st
		changed()
	})
}

// pollFile reads path every interval, from a goroutine of its own until Shutdown, and calls
// changed with what it read when that differs from what last returns.
func (g *Gateway) pollFile(path string, interval time.Duration, last func() fileState, changed func(fileState)) {
	g.pollers.Add(1)
	go func() {
		defer g.pollers.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-g.stopPoll:
				return
			case <-t.C:
			}
			if st := readState(path); !st.same(last()) {
				changed(st)
			}
		}
	}()
}
