package main

import (
	"io"
	"log/slog"
	"slices"

	gw "github.com/otlpgate/otlpgate/internal/gateway"
)

// configSource is where the running configuration came from, so that a reload can read it
// again: the command line as given and what the config file set.
type configSource struct {
	args   []string
	getenv func(string) (string, bool)
	path   string    // -config; empty without a config file
	file   []setting // the running configuration's settings from the file
	body   []byte    // the file as read at the start
}

// reload reads the command line and the config file again and applies what can change while
// otlpgate runs: the destinations (dest), through the gateway's reload, which SIGHUP also
// does without a config file; the processing steps (processKeys) and the tenants' rate
// (rateKeys), when one of their keys changed. A file that cannot be read or holds an invalid configuration
// changes nothing: logged and counted in otlpgate_config_reload_failures_total. Every other key
// whose value changed is logged by name, not applied: it takes a restart. why is reload
// (SIGHUP) or changed (the file changed, seen by polling it); a change that leaves every
// setting as it was reloads nothing. Runs on serve's goroutine only.
func (src *configSource) reload(g *gw.Gateway, log *slog.Logger, why string) {
	pc, err := loadConfig(src.args, src.getenv, io.Discard)
	if err == nil {
		err = finishConfig(&pc.cfg)
	}
	if err != nil {
		gw.ReloadFailed()
		log.Error("cannot reload the config file; the running configuration is kept", "file", src.path, "trigger", why, "err", err)
		if why == "reload" {
			g.Reload() // SIGHUP still reads the files the running configuration names
		}
		return
	}
	changed := changedKeys(src.file, pc.file)
	if why == "changed" && len(changed) == 0 {
		log.Debug("config file changed without a change of a setting", "file", src.path)
		return
	}
	running := map[string]setting{}
	for _, s := range src.file {
		running[s.key] = s
	}
	next := map[string]setting{}
	for _, s := range pc.file {
		next[s.key] = s
	}
	var restart []string
	for _, k := range changed {
		if !reloadable[k] {
			restart = append(restart, k)
			log.Warn("config file: a changed key is not applied: it takes a restart", "file", src.path, "key", k)
		}
	}
	refusedKeys := map[string]bool{}
	if applied, _ := g.ReloadWith(pc.cfg.gw.Dests); !applied { // each failure is logged by the gateway
		refusedKeys["dest"] = true
	}
	if slices.ContainsFunc(changed, func(k string) bool { return slices.Contains(processKeys, k) }) {
		g.SetProcessor(pc.cfg.gw.Pipeline.Processor)
	}
	if slices.ContainsFunc(changed, func(k string) bool { return slices.Contains(rateKeys, k) }) {
		if err := g.SetTenantRate(pc.cfg.gw.Tenants.Rate); err != nil {
			log.Error("cannot apply the tenant rate; the running one stays", "file", src.path, "err", err)
			for _, k := range rateKeys {
				refusedKeys[k] = true
			}
		}
	}
	var done, refused []string
	for _, k := range changed {
		switch {
		case !reloadable[k]:
		case refusedKeys[k]:
			refused = append(refused, k)
		default:
			done = append(done, k)
		}
	}
	// What runs now: the keys applied with their new settings, the others as they were.
	var now []setting
	for _, k := range unionKeys(running, next) {
		s, ok := running[k]
		if reloadable[k] && !refusedKeys[k] {
			s, ok = next[k]
		}
		if ok {
			now = append(now, s)
		}
	}
	src.file = now
	log.Info("config file reloaded", "file", src.path, "trigger", why, "applied", done, "refused", refused, "need_restart", restart)
}

// unionKeys returns the keys of a and b, sorted.
func unionKeys(a, b map[string]setting) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
