package gateway

import (
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/internal/credfile"
)

// A secret mounted from a Kubernetes Secret (or rotated by any agent that rewrites a file) is
// replaced on disk without a signal to the process that reads it. Until otlpgate reads it again
// it sends the old API key, and an upstream that refuses it turns everything sent into
// rejections. So the files a reload reads again are read every -secrets.poll-interval too, and
// a change reloads as SIGHUP does.

var secretChanges = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_secret_file_changes_total",
	Help: "Changes seen, by reading them every -secrets.poll-interval, in the files a reload reads again (a -dest header-file or bearer-token-file, a ${file:PATH} of -dest.file, -auth.tenants-file); each is followed by a reload, as SIGHUP does.",
})

// secretFiles lists, sorted and once each, the files whose content a reload reads again: the
// header-file and bearer-token-file of every -dest and -dest.file destination, the
// ${file:PATH} references of -dest.file's lines, the bearer-token-file of the destinations
// configured in code, and TenantsFile. Safe for concurrent use.
func (g *Gateway) secretFiles() []string {
	g.dmu.Lock()
	dests, body := g.cfg.Dests, g.dmu.seen.body
	g.dmu.Unlock()
	var paths []string
	if g.cfg.DestFile != "" {
		for line := range strings.SplitSeq(string(body), "\n") {
			paths = append(paths, credfile.FileRefs(line)...)
		}
		// A line that cannot be read now names no file: the reload that reads it fails and
		// says why, and the poller of -dest.file sees it change once it is mended.
		if specs, err := parseDestFile(body); err == nil {
			dests = append(slices.Clip(dests), specs...)
		}
	}
	for _, d := range dests {
		if s, err := client.ReadDest(d); err == nil {
			paths = append(paths, s.Files()...)
		}
	}
	for _, d := range g.cfg.Destinations {
		if d.BearerTokenFile != "" {
			paths = append(paths, d.BearerTokenFile)
		}
	}
	if g.cfg.TenantsFile != "" {
		paths = append(paths, g.cfg.TenantsFile)
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

// pollSecrets reads secretFiles every SecretsPoll, from a goroutine of its own until
// Shutdown, and reloads (Reload) when one of them reads otherwise than at the previous poll.
// A file that appears in the list (a destination added) is first read as it is: only a change
// after that reloads. A change that cannot be applied (a file emptied) is reported by the
// reload once, and not retried at every poll. While there is no file to read and only a reload
// can name one (no -dest.file, whose lines may name files at its next read), the poller sleeps
// until a reload (secretsReloaded), so that a process without secrets wakes no thread for it.
func (g *Gateway) pollSecrets() {
	last, next := map[string]fileState{}, map[string]fileState{}
	for _, p := range g.secretFiles() {
		last[p] = readState(p)
	}
	g.pollers.Add(1)
	go func() {
		defer g.pollers.Done()
		t := time.NewTicker(g.cfg.SecretsPoll)
		defer t.Stop()
		for {
			select {
			case <-g.stopPoll:
				return
			case <-t.C:
			}
			g.secretPolls.Add(1)
			paths := g.secretFiles()
			if len(paths) == 0 && len(last) == 0 {
				if g.cfg.DestFile != "" {
					continue // nothing to read: a poll allocates nothing
				}
				t.Stop()
				select {
				case <-g.stopPoll:
					return
				case <-g.secretsWake:
				}
				t.Reset(g.cfg.SecretsPoll)
				// What the reload named is read now, as it is: a change after this reloads.
				for _, p := range g.secretFiles() {
					last[p] = readState(p)
				}
				continue
			}
			// The two maps take turns, so that a poll that finds no change allocates no map.
			clear(next)
			var changed []string
			for _, p := range paths {
				st := readState(p)
				next[p] = st
				if old, ok := last[p]; ok && !st.same(old) {
					changed = append(changed, p)
				}
			}
			last, next = next, last
			if len(changed) == 0 {
				continue
			}
			secretChanges.Add(float64(len(changed)))
			g.log.Info("a file a reload reads changed: reloading", "files", changed)
			// Reload logs each failure and keeps what ran before.
			_ = g.Reload()
		}
	}()
}

// secretsReloaded wakes the secrets poller if it sleeps: a reload may have named files (a
// -config's destinations with a bearer-token-file). A wake-up it does not need costs one poll.
// Safe for concurrent use.
func (g *Gateway) secretsReloaded() {
	select {
	case g.secretsWake <- struct{}{}:
	default:
	}
}
